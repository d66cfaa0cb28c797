//! The command-line surface.
//!
//! (Temporary dispatch of `autocode supervise` by the supervise work, for end-to-end tests until
//! the integrator's clap surface lands.)

pub fn main() -> std::process::ExitCode {
    crate::supervise::init_before_threads();
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|arg| arg == "supervise") {
        let mut json = false;
        let mut timeout = None;
        let mut receipt = None;
        let mut rest = args.into_iter().skip(1);
        let mut argv = Vec::new();
        while let Some(arg) = rest.next() {
            match arg.to_str() {
                Some("--json") => json = true,
                Some("--timeout") => {
                    timeout = rest
                        .next()
                        .and_then(|value| value.to_str()?.parse::<f64>().ok())
                        .map(std::time::Duration::from_secs_f64)
                }
                Some("--receipt") => receipt = rest.next().map(std::path::PathBuf::from),
                Some("--") => {
                    argv.extend(rest.by_ref());
                }
                _ => argv.push(arg),
            }
        }
        let Ok(runtime) = tokio::runtime::Runtime::new() else {
            return std::process::ExitCode::from(2);
        };
        let code = runtime.block_on(crate::supervise::supervise_command(
            argv, timeout, json, receipt,
        ));
        return std::process::ExitCode::from(code.clamp(0, 255) as u8);
    }
    std::process::ExitCode::SUCCESS
}
