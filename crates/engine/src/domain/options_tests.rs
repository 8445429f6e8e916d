//! Tests of job options: BullMQ's shapes parsed, every bad value refused with its option named.

use super::options::*;

#[test]
fn parses_bullmq_shapes() {
    let o = JobOptions::from_json(
        r#"{"delay":100,"priority":3,"lifo":true,"attempts":4,"backoff":{"type":"exponential","delay":50},"removeOnComplete":true,"removeOnFail":{"age":60,"count":5},"timestamp":5}"#,
    )
    .unwrap();
    assert_eq!(o.delay, 100);
    assert_eq!(o.priority, 3);
    assert!(o.lifo);
    assert_eq!(o.attempts, 4);
    assert_eq!(
        o.backoff,
        Some(Backoff::Exponential {
            delay: 50,
            jitter: 0.0
        })
    );
    assert_eq!(o.remove_on_complete, Some(KeepJobs::None));
    assert_eq!(
        o.remove_on_fail,
        Some(KeepJobs::Bounded {
            count: Some(5),
            age_secs: Some(60)
        })
    );
    let o = JobOptions::from_json(r#"{"backoff":20,"removeOnComplete":10,"attempts":0}"#).unwrap();
    assert_eq!(
        o.backoff,
        Some(Backoff::Fixed {
            delay: 20,
            jitter: 0.0
        })
    );
    assert_eq!(
        o.remove_on_complete,
        Some(KeepJobs::Bounded {
            count: Some(10),
            age_secs: None
        })
    );
    assert_eq!(o.attempts, 1);
}

#[test]
fn errors_name_the_option() {
    for (json, option) in [
        (r#"{"priority":-1}"#, "priority"),
        (r#"{"priority":2097153}"#, "priority"),
        (r#"{"priority":1.5}"#, "priority"),
        (r#"{"delay":-5}"#, "delay"),
        (r#"{"attempts":-1}"#, "attempts"),
        (r#"{"backoff":{"type":"","delay":1}}"#, "backoff.type"),
        (
            r#"{"backoff":{"type":"fixed","delay":1,"jitter":2}}"#,
            "backoff.jitter",
        ),
        (r#"{"removeOnFail":{"count":-2}}"#, "removeOnFail.count"),
        (r#"{"keepLogs":-1}"#, "keepLogs"),
        (r#"{"keepLogs":2.5}"#, "keepLogs"),
        (r#"{"jobId":"12"}"#, "jobId"),
        (r#"{"timestamp":-1}"#, "timestamp"),
        (r#"{"delay":1,"colour":"red"}"#, "colour"),
        (r#"{"jobId":""}"#, "jobId"),
    ] {
        let e = JobOptions::from_json(json).unwrap_err();
        assert!(e.to_string().starts_with(option), "{json}: {e}");
        assert_eq!(e.code(), "ERR_INVALID_OPTION");
    }
    assert!(JobOptions::from_json(r#"{"delay":"x"}"#).is_err());
    assert!(JobOptions::from_json(r#"{"keepLogs":"x"}"#).is_err());
    assert!(JobOptions::from_json(r#"{"keepLogs":100}"#).is_ok());
    assert!(JobOptions::from_json("not json").is_err());
    assert!(validate_custom_id("007").is_ok());
    assert!(validate_custom_id("a:b:1").is_ok());
    assert!(validate_custom_id("-3").is_err());
    let e = validate_custom_id("a\0b").unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_OPTION");
    assert!(e.to_string().contains("U+0000"), "{e}");
}

#[test]
fn bullmq_options_not_implemented_are_refused_by_name() {
    for name in UNSUPPORTED_JOB_OPTIONS {
        let e = JobOptions::from_json(&format!(r#"{{"delay":1,"{name}":{{}}}}"#)).unwrap_err();
        assert_eq!(e.code(), "ERR_UNSUPPORTED_OPTION", "{name}");
        assert!(e.to_string().starts_with(name), "{e}");
    }
    let e = JobOptions::from_json(r#"{"delay":1,"priorty":2}"#).unwrap_err();
    assert_eq!(e.code(), "ERR_INVALID_OPTION");
    assert!(e.to_string().contains("priorty is not an option"), "{e}");
    let long = "x".repeat(500);
    let e = JobOptions::from_json(&format!(r#"{{"{long}":1}}"#)).unwrap_err();
    assert!(e.to_string().len() < 400, "{e}");
}

#[test]
fn stored_options_skip_names_an_older_version_accepted() {
    let o = JobOptions::from_stored_json(r#"{"attempts":3,"repeat":{"every":5},"x":1}"#).unwrap();
    assert_eq!(o.attempts, 3);
    assert!(JobOptions::from_stored_json(r#"{"attempts":-3}"#).is_err());
}

#[test]
fn custom_backoff_types_are_left_to_the_worker() {
    let o = JobOptions::from_json(r#"{"backoff":{"type":"linear","delay":7}}"#).unwrap();
    assert_eq!(o.backoff, Some(Backoff::Custom));
    assert_eq!(Backoff::Custom.delay_with_jitter(3, 0.5), 0);
}

#[test]
fn backoff_delays() {
    let e = Backoff::Exponential {
        delay: 100,
        jitter: 0.0,
    };
    assert_eq!(e.base_delay(1), 100);
    assert_eq!(e.base_delay(2), 200);
    assert_eq!(e.base_delay(3), 400);
    assert_eq!(e.base_delay(200), 100u64.saturating_mul(1 << 62));
    let f = Backoff::Fixed {
        delay: 70,
        jitter: 0.5,
    };
    assert_eq!(f.delay_with_jitter(3, 0.0), 35);
    assert_eq!(f.delay_with_jitter(3, 0.999_999), 70);
}

#[test]
fn timeout_is_a_whole_number_of_ms_a_js_timer_can_keep() {
    for ok in ["1", "1000", "2147483647"] {
        assert!(
            JobOptions::from_json(&format!(r#"{{"timeout":{ok}}}"#)).is_ok(),
            "{ok}"
        );
    }
    for bad in ["0", "-5", "1.5", "2147483648"] {
        let e = JobOptions::from_json(&format!(r#"{{"timeout":{bad}}}"#)).unwrap_err();
        assert!(e.to_string().contains("timeout"), "{bad}: {e}");
    }
}
