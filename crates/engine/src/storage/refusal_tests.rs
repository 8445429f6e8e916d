//! Files the durable engine refuses, untouched: one already open (one engine per file), a file
//! that is not SQLite, another application's database, a newer schema, a corrupt file.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use super::tests::{job, open, settle};

#[test]
fn one_engine_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let e = open(&path).unwrap();
    let err = open(&path).err().unwrap();
    assert_eq!(err.code(), "ERR_STORAGE_LOCKED");
    e.close();
    let again = open(&path).unwrap();
    again.close();
}

fn assert_refused(path: &Path, code: &str) {
    let before = std::fs::read(path).unwrap();
    let err = open(path).err().expect("must be refused");
    assert_eq!(err.code(), code, "{err}");
    assert_eq!(
        std::fs::read(path).unwrap(),
        before,
        "the file must be left untouched"
    );
    assert!(!path.with_extension("db-wal").exists());
}

#[test]
fn refuses_a_file_that_is_not_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.db");
    std::fs::write(
        &path,
        b"hello, this is a text file and not a database at all",
    )
    .unwrap();
    assert_refused(&path, "ERR_STORAGE_FOREIGN");
}

#[test]
fn refuses_another_applications_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.db");
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users VALUES (1, 'ada');")
        .unwrap();
    drop(c);
    assert_refused(&path, "ERR_STORAGE_FOREIGN");
}

#[test]
fn refuses_a_newer_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.db");
    open(&path).unwrap().close();
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute("INSERT INTO ferroqueue_migrations VALUES (99, 0)", [])
        .unwrap();
    c.execute_batch("PRAGMA journal_mode=DELETE").unwrap();
    drop(c);
    assert_refused(&path, "ERR_STORAGE_VERSION");
}

#[test]
fn refuses_a_corrupt_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.db");
    let e = open(&path).unwrap();
    let q = e.queue_ref("q").unwrap();
    for i in 0..2_000 {
        e.add(
            &q,
            job(
                "x",
                &format!("{{\"i\":{i},\"pad\":\"{}\"}}", "p".repeat(100)),
                "{}",
            ),
        );
    }
    settle(&e);
    e.close();
    // Trash a page in the middle of the file (not the header).
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len > 64 * 1024, "{len}");
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.seek(SeekFrom::Start(len / 2)).unwrap();
    f.write_all(&vec![0xA5; 8192]).unwrap();
    drop(f);
    assert_refused(&path, "ERR_STORAGE_CORRUPT");
}
