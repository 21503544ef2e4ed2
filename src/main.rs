use std::process::ExitCode;

fn main() -> ExitCode {
    pagebench::cli::main()
}
