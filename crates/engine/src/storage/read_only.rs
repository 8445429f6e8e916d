//! A look at a database file without taking it (the CLI's reads): a read-only connection and
//! no `flock`, so it works while an app holds the file. It reads what was last committed (the
//! WAL included) and writes nothing, not even a recovery; an engine built from it
//! ([`crate::application::engine::EngineConfig::read_only`]) answers reads from memory.

use std::path::Path;

use super::recovery::{self, Snapshot};
use super::schema::{classify, open_reader, APPLICATION_ID, SCHEMA_VERSION};
use crate::error::{EngineError, Result};

/// Everything the file at `path` holds, finished jobs included.
///
/// Errors: `ERR_STORAGE_IO` when there is no such file, `ERR_STORAGE_FOREIGN` for a file that is
/// not ferroqueue's, `ERR_STORAGE_VERSION` for one of another version (an app of this version
/// migrates it when it opens it), `ERR_STORAGE_CORRUPT` for a damaged one.
pub fn snapshot(path: &Path) -> Result<Snapshot> {
    let shown = path.display().to_string();
    if !path.is_file() {
        return Err(EngineError::StorageIo {
            path: shown,
            reason: "no such file".into(),
        });
    }
    let conn = open_reader(path)?;
    let err = |e| classify(&shown, e);
    let app_id: i64 = conn
        .pragma_query_value(None, "application_id", |r| r.get(0))
        .map_err(err)?;
    if app_id != APPLICATION_ID {
        return Err(EngineError::StorageForeign {
            path: shown,
            reason: format!("application_id is {app_id:#x}, not ferroqueue's"),
        });
    }
    let version: i64 = conn
        .query_row(
            "SELECT coalesce(max(version), 0) FROM ferroqueue_migrations",
            [],
            |r| r.get(0),
        )
        .map_err(err)?;
    if version != SCHEMA_VERSION {
        return Err(EngineError::StorageVersion {
            path: shown,
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    // One transaction: the tables are read as of one commit, whatever the app writes meanwhile.
    conn.execute_batch("BEGIN").map_err(err)?;
    let snap = recovery::load(&conn, usize::MAX).map_err(err)?;
    conn.execute_batch("COMMIT").map_err(err)?;
    Ok(snap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::limits::WorkerLimits;
    use crate::domain::queue::Added;
    use crate::storage::tests::{ack_ok, job, open, settle};

    #[test]
    fn reads_a_file_an_engine_holds_and_refuses_what_is_not_ours() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("held.db");
        let e = open(&path).unwrap();
        let q = e.queue_ref("mail").unwrap();
        for n in 0..3 {
            assert!(matches!(
                e.add(&q, job("a", &format!("{{\"n\":{n}}}"), "{}")),
                Added::New(_)
            ));
        }
        let (_, json) = e.take(&q, 1, WorkerLimits::default());
        let (id, token) = crate::domain::job::parse_taken(&json).remove(0);
        ack_ok(&e, &q, &id, token, "\"done\"");
        settle(&e);
        let _ = e.take(&q, 1, WorkerLimits::default());
        settle(&e);
        // The engine holds the file (its flock): a look still reads every job.
        let snap = snapshot(&path).unwrap();
        let rows: usize = snap.queues.values().map(|s| s.rows.len()).sum();
        assert_eq!(rows, 3);
        // An engine on the view keeps the active job active, and writes nothing.
        let view = crate::Engine::new(crate::EngineConfig {
            path: Some(path.clone()),
            read_only: true,
            timer: false,
            ..crate::EngineConfig::new(crate::wire::test_json::wire())
        })
        .unwrap();
        assert!(!view.is_durable());
        let vq = view.queue_ref("mail").unwrap();
        let mut counts: Vec<(String, usize)> = view
            .counts(&vq, &[])
            .unwrap()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(s, n)| (s.to_string(), n))
            .collect();
        counts.sort();
        assert_eq!(
            counts,
            vec![
                ("active".into(), 1),
                ("completed".into(), 1),
                ("waiting".into(), 1)
            ]
        );
        assert_eq!(view.queue_names(), vec!["mail".to_string()]);
        view.close();

        let code = |p: &Path| snapshot(p).err().map(|e| e.code());
        assert_eq!(code(&dir.path().join("none.db")), Some("ERR_STORAGE_IO"));
        let foreign = dir.path().join("foreign.db");
        rusqlite::Connection::open(&foreign)
            .unwrap()
            .execute_batch("CREATE TABLE t (x INTEGER);")
            .unwrap();
        assert_eq!(code(&foreign), Some("ERR_STORAGE_FOREIGN"));
        e.close();
    }
}
