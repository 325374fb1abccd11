//! The `forktrail` command-line tool.

mod cli;

/// mimalloc gives back what an ingest frees, where glibc's per-thread arenas keep it.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
