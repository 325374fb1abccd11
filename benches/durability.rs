//! What durability costs on RocksDB: appends with nothing synced (a write survives a
//! process crash, not a power loss), with `Store::flush` after every append (each
//! acknowledged append is on disk), and with a flush every 100 ms from another thread
//! (at most the last 100 ms lost on power loss). One run, ratios from the same run.
//!
//! `cargo bench --bench durability`.

#[cfg(feature = "rocksdb")]
fn main() {
    use forktrail::{NewSession, NewTurn, Role, Store};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    const APPENDS: usize = 2_000;
    let content = "x".repeat(500);
    let run = |mode: &str| -> Duration {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("store")).unwrap();
        let id = store.create_session(NewSession::default()).unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            if mode == "interval" {
                scope.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(100));
                        store.flush().unwrap();
                    }
                });
            }
            let start = Instant::now();
            for _ in 0..APPENDS {
                store
                    .append(&id, NewTurn::new(Role::User, content.clone()))
                    .unwrap();
                if mode == "sync" {
                    store.flush().unwrap();
                }
            }
            let took = start.elapsed();
            stop.store(true, Ordering::Relaxed);
            took
        })
    };
    let process = run("process");
    let interval = run("interval");
    let sync = run("sync");
    let per = |d: Duration| APPENDS as f64 / d.as_secs_f64();
    println!("{APPENDS} appends of 500 bytes on RocksDB:");
    for (name, took) in [
        ("process", process),
        ("interval 100 ms", interval),
        ("sync", sync),
    ] {
        println!(
            "  {name:<16} {:>8.0} appends/s  ({:.2}x the time of process)",
            per(took),
            took.as_secs_f64() / process.as_secs_f64()
        );
    }
}

#[cfg(not(feature = "rocksdb"))]
fn main() {
    println!("the durability bench needs the rocksdb feature");
}
