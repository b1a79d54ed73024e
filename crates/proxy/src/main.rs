//! `darner-proxy`: see the crate documentation of `darner_proxy`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{}", darner_proxy::config::USAGE);
        return;
    }
    let cfg = match darner_proxy::config::parse(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("darner-proxy: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = darner_proxy::server::run(cfg) {
        eprintln!("darner-proxy: {e}");
        std::process::exit(1);
    }
}
