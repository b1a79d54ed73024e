//! `darner [path/to/darner.conf] [--directive value ...]`, `darner -v`, `darner -h`,
//! `darner proxy --listen host:port --cluster host:port[,...]` (runs `darner-proxy`).

use darner_server::{config, log, server, DARNER_VERSION, REDIS_COMPAT_VERSION};

fn usage() {
    println!(
        "Usage: darner [/path/to/darner.conf] [options]\n       darner -v or --version\n       darner -h or --help\n       \
         darner proxy --listen <host:port> --cluster <host:port>[,...] (the cluster proxy)\n\n\
         Examples:\n       darner (run with default configuration)\n       darner /etc/darner/6379.conf\n       \
         darner --port 7777 --threads 4\n       darner /etc/mydarner.conf --loglevel verbose\n\n\
         Any directive of the config file can be given as --directive value (the last one wins)."
    );
}

/// `darner proxy ...`: replaces this process with the `darner-proxy` binary installed next to
/// it, so that the proxy's process carries neither the engine nor the server's memory (the
/// proxy crate never links them).
fn exec_proxy(args: &[String]) -> ! {
    use std::os::unix::process::CommandExt;
    let path = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("darner-proxy")));
    let Some(path) = path else {
        eprintln!("darner proxy: cannot find the directory of this executable");
        std::process::exit(1);
    };
    let err = std::process::Command::new(&path).args(args).exec();
    eprintln!("darner proxy: cannot run {}: {err}", path.display());
    std::process::exit(1);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rest = &args[1..];
    if let Some(first) = rest.first() {
        match first.as_str() {
            "-v" | "--version" => {
                println!(
                    "Darner server v={DARNER_VERSION} redis_compat={REDIS_COMPAT_VERSION} bits=64"
                );
                return;
            }
            "-h" | "--help" => {
                usage();
                return;
            }
            "proxy" => exec_proxy(&rest[1..]),
            _ => {}
        }
    }
    let (file, opts) = match rest.first() {
        Some(f) if !f.starts_with("--") => (Some(std::path::PathBuf::from(f)), &rest[1..]),
        _ => (None, rest),
    };
    // Resolved before loading: a `dir` directive changes the working directory.
    let conf = file
        .as_ref()
        .and_then(|f| std::fs::canonicalize(f).ok())
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let cfg = match config::load(file.as_deref(), opts) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = log::init(&cfg.get("logfile").unwrap_or_default()) {
        eprintln!("Can't open the log file: {e}");
        std::process::exit(1);
    }
    if cfg.get("disable-thp").as_deref() == Some("yes") {
        // SAFETY: PR_SET_THP_DISABLE only sets a flag of this process (inherited by its
        // threads); the call takes plain integers and touches no memory of ours.
        // Exercised by every end-to-end test (it is the default); checked through
        // /proc/PID/status by crates/server/tests/e2e/server.rs.
        let r = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if r != 0 {
            log::warning("Failed to disable transparent huge pages for this process");
        }
    }
    log::notice("oO0OoO0OoO0Oo Darner is starting oO0OoO0OoO0Oo");
    log::notice(&format!(
        "Darner version={DARNER_VERSION}, redis_version={REDIS_COMPAT_VERSION}, bits=64, pid={}, just started",
        std::process::id()
    ));
    match &file {
        Some(f) => log::notice(&format!("Configuration loaded from {}", f.display())),
        None => log::warning("Warning: no config file specified, using the default config. In order to specify a config file use darner /path/to/darner.conf"),
    }
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    if let Err(e) = server::run(cfg, exe, conf) {
        log::warning(&e);
        std::process::exit(1);
    }
}
