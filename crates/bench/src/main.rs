//! darner-bench: see the library's documentation (`src/lib.rs`) for the layout.

use darner_bench::config::Config;
use darner_bench::driver;
use darner_bench::report::Summary;

fn main() {
    let cfg = match Config::parse(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(msg) => {
            let help = std::env::args().any(|a| a == "--help");
            eprintln!("{msg}");
            std::process::exit(if help { 0 } else { 2 });
        }
    };
    let result = match driver::run(&cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("darner-bench: {e}");
            std::process::exit(1);
        }
    };
    let s = Summary::new(&cfg, &result);
    if cfg.json {
        println!("{}", s.to_json(&cfg));
    } else {
        print!("{}", s.to_table());
    }
}
