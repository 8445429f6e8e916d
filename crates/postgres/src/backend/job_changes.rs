//! Changes of one job (progress, logs, data, priority, delay, promotion, retry), each one
//! statement that also writes its QueueEvents row. A change that did nothing answers the
//! embedded engine's error (`ERR_JOB_NOT_FOUND`, `ERR_INVALID_STATE`).

use ferroqueue_engine::backend::JobChange;
use ferroqueue_engine::domain::job::JobState;
use ferroqueue_engine::{EngineError, Result};
use tokio_postgres::types::ToSql;

use super::read::{id_params, id_text, key_cte};
use super::Shared;
use crate::record::state_number;

/// The state of job `id` (`None`: no such job), for the errors of a change that did nothing.
async fn state_for_error(s: &Shared, queue: &str, id: &str) -> Result<Option<JobState>> {
    super::read::state(s, queue, id).await
}

/// Changes one job; answers its log row count for a log, else 0.
pub(super) async fn change(s: &Shared, queue: &str, id: &str, change: JobChange) -> Result<usize> {
    let sch = s.target().schema();
    // `$4` (the id as events carry it) is typed here for the statements that do not use it.
    let k = format!("{}, id_text AS (SELECT $4::text)", key_cte(sch));
    let (auto, custom) = id_params(id);
    // Each arm: the statement, its parameters after ($1 queue, $2 auto key, $3 custom id,
    // $4 id), and the state the job must be in (for the error when nothing changed).
    let both = |set: &str, ev: &str| {
        format!(
            "WITH {k}, a AS (
                UPDATE {sch}.jobs SET {set} WHERE queue = $1 AND key = (SELECT key FROM k)
                RETURNING logs
            ), b AS (
                UPDATE {sch}.finished SET {set} WHERE queue = $1 AND key = (SELECT key FROM k)
                RETURNING logs
            ), changed AS (SELECT * FROM a UNION ALL SELECT * FROM b){ev}
            SELECT COALESCE(jsonb_array_length(logs::jsonb), 0) FROM changed"
        )
    };
    type Want = Option<(&'static str, JobState)>;
    let (sql, extra, want): (String, Vec<Box<dyn ToSql + Sync + Send>>, Want) = match change {
        JobChange::Progress(p) => (
            both(
                "progress = $5",
                &format!(
                    ", ev AS (INSERT INTO {sch}.events (queue, event, payload)
                        SELECT $1, 'progress', json_build_array(json_build_object(
                            'id', $4::text, 'data', $5::json))::text
                        FROM changed)"
                ),
            ),
            vec![Box::new(String::from(p))],
            None,
        ),
        JobChange::Log { row, keep } => (
            both(
                "logs = (SELECT jsonb_agg(x ORDER BY n)::text FROM (
                        SELECT x, n FROM jsonb_array_elements(
                            COALESCE(logs, '[]')::jsonb || jsonb_build_array($5::text)
                        ) WITH ORDINALITY AS e(x, n)
                        ORDER BY n DESC LIMIT $6) newest)",
                "",
            ),
            vec![
                Box::new(crate::text::store(&row).into_owned()),
                Box::new((keep > 0).then_some(keep.min(i64::MAX as usize) as i64)),
            ],
            None,
        ),
        JobChange::Data(d) => (both("data = $5", ""), vec![Box::new(String::from(d))], None),
        JobChange::Priority { priority, lifo } => (
            format!(
                "WITH {k}, o AS (
                        UPDATE {sch}.queues SET order_seq = order_seq + 1 WHERE name = $1
                        RETURNING order_seq
                    ), changed AS (
                        UPDATE {sch}.jobs j
                        SET priority = $5,
                            state = CASE WHEN j.state IN (0, 1)
                                         THEN CASE WHEN $5 > 0 THEN 1 ELSE 0 END
                                         ELSE j.state END,
                            ord = CASE WHEN j.state IN (0, 1)
                                       THEN CASE WHEN $6 THEN -o.order_seq ELSE o.order_seq END
                                       ELSE j.ord END
                        FROM o WHERE j.queue = $1 AND j.key = (SELECT key FROM k)
                        RETURNING logs
                    ), b AS (
                        UPDATE {sch}.finished SET priority = $5
                        WHERE queue = $1 AND key = (SELECT key FROM k)
                        RETURNING logs
                    )
                    SELECT 0 FROM changed UNION ALL SELECT 0 FROM b"
            ),
            vec![
                Box::new(priority.min(i32::MAX as u32) as i32),
                Box::new(lifo),
            ],
            None,
        ),
        JobChange::Delay(d) => (
            format!(
                "WITH {k}, changed AS (
                        UPDATE {sch}.jobs
                        SET run_at = {wait},
                            delay = $5
                        WHERE queue = $1 AND key = (SELECT key FROM k) AND state = 2
                        RETURNING run_at
                    ), ev AS (
                        INSERT INTO {sch}.events (queue, event, payload)
                        SELECT $1, 'delayed', json_build_array(json_build_object(
                            'id', $4::text, 'at', {at}))::text
                        FROM changed
                    )
                    SELECT 0 FROM changed",
                at = crate::jobs::ms("run_at"),
                wait = crate::jobs::after_ms("$5::int8"),
            ),
            vec![Box::new(d.min(i64::MAX as u64) as i64)],
            Some(("changeDelay", JobState::Delayed)),
        ),
        JobChange::Promote => (
            format!(
                "WITH {k}, o AS (
                        UPDATE {sch}.queues SET order_seq = order_seq + 1 WHERE name = $1
                        RETURNING order_seq
                    ), changed AS (
                        UPDATE {sch}.jobs j
                        SET state = CASE WHEN j.priority > 0 THEN 1 ELSE 0 END, run_at = NULL,
                            delay = 0, ord = o.order_seq
                        FROM o WHERE j.queue = $1 AND j.key = (SELECT key FROM k) AND j.state = 2
                        RETURNING j.key
                    ), ev AS (
                        INSERT INTO {sch}.events (queue, event, payload)
                        SELECT $1, 'waiting', json_build_array(json_build_object(
                            'id', $4::text, 'prev', 'delayed'))::text
                        FROM changed
                    )
                    SELECT 0 FROM changed"
            ),
            Vec::new(),
            Some(("promote", JobState::Delayed)),
        ),
        JobChange::Retry {
            from,
            reset_attempts,
        } => {
            if !matches!(from, JobState::Failed | JobState::Completed) {
                return Err(EngineError::range(
                    "state",
                    format!("must be 'failed' or 'completed', got '{}'", from.as_str()),
                ));
            }
            (
                format!(
                    "WITH {k}, back AS (
                            DELETE FROM {sch}.finished
                            WHERE queue = $1 AND key = (SELECT key FROM k) AND state = $5
                            RETURNING *
                        ), o AS (
                            UPDATE {sch}.queues SET order_seq = order_seq + 1 WHERE name = $1
                            RETURNING order_seq
                        ), ins AS (
                            INSERT INTO {sch}.jobs (queue, key, custom_id, name, data, opts, state,
                                priority, ord, delay, timestamp, attempts_made, attempts_started,
                                stalled_counter, progress, stacktrace, logs, group_id,
                                processed_by, history)
                            SELECT queue, key, custom_id, name, data, opts,
                                   CASE WHEN priority > 0 THEN 1 ELSE 0 END, priority,
                                   o.order_seq, delay, timestamp,
                                   CASE WHEN $6 THEN 0 ELSE attempts_made END,
                                   CASE WHEN $6 THEN 0 ELSE attempts_started END,
                                   stalled_counter, progress, stacktrace, logs,
                                   COALESCE(opts::json -> 'group' ->> 'id', ''), processed_by,
                                   history
                            FROM back, o
                            RETURNING key, group_id
                        ), grp AS (
                            -- Its group's row, after the queue row's lock (see groups.rs).
                            INSERT INTO {sch}.groups (queue, id)
                            SELECT $1, group_id FROM ins, o WHERE group_id <> ''
                            ON CONFLICT DO NOTHING
                        ), ev AS (
                            INSERT INTO {sch}.events (queue, event, payload)
                            SELECT $1, 'waiting', json_build_array(json_build_object(
                                'id', $4::text, 'prev', $7::text))::text
                            FROM ins
                        )
                        SELECT 0 FROM ins"
                ),
                vec![
                    Box::new(state_number(from)),
                    Box::new(reset_attempts),
                    Box::new(from.as_str().to_string()),
                ],
                Some(("retry", from)),
            )
        }
    };
    let shown = id_text(id);
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&queue, &auto, &custom, &shown];
    for p in &extra {
        params.push(p.as_ref() as &(dyn ToSql + Sync));
    }
    let c = s.pool.get().await?;
    let rows = c
        .query(s.target(), "cannot change a job", &sql, &params)
        .await?;
    if let Some(r) = rows.first() {
        s.wake(queue);
        return Ok(r.get::<_, i32>(0).max(0) as usize);
    }
    match (state_for_error(s, queue, id).await?, want) {
        (Some(state), Some((operation, expected))) => Err(EngineError::InvalidState {
            id: id.to_string(),
            state: state.as_str(),
            operation,
            expected: expected.as_str(),
        }),
        _ => Err(EngineError::JobNotFound(id.to_string())),
    }
}
