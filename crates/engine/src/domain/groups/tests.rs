use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::domain::job::Job;
use crate::domain::options::JobOptions;

fn table(n: u64) -> JobTable {
    let mut t = JobTable::default();
    for k in 0..n {
        t.insert(
            k,
            Job::new(k, Arc::from("j"), "{}".into(), &JobOptions::defaults(), 0),
        );
    }
    t
}

fn gid(name: &str) -> Arc<str> {
    Arc::from(name)
}

const NONE: GroupDefaults = GroupDefaults {
    concurrency: None,
    rate: None,
};

fn take_all(g: &mut Groups, jobs: &mut JobTable, d: GroupDefaults, now: u64) -> Vec<JobKey> {
    std::iter::from_fn(|| g.next(jobs, d, now).map(|(k, _)| k)).collect()
}

#[test]
fn groups_take_turns_and_each_is_fifo() {
    let mut jobs = table(1_010);
    let mut g = Groups::default();
    let (a, b) = (gid("A"), gid("B"));
    for k in 0..1_000 {
        g.push(&mut jobs, &a, k, (0, k as i64));
    }
    for k in 1_000..1_010 {
        g.push(&mut jobs, &b, k, (0, k as i64));
    }
    assert_eq!(g.len(), 1_010);
    let order = take_all(&mut g, &mut jobs, NONE, 0);
    // B's ten jobs alternate with A's first ten: all of B is out within 20 takes.
    let firsts: Vec<JobKey> = order[..20].to_vec();
    let want: Vec<JobKey> = (0..10).flat_map(|i| [i, 1_000 + i]).collect();
    assert_eq!(firsts, want);
    assert_eq!(&order[20..], &(10..1_000).collect::<Vec<_>>()[..]);
    assert!(g.is_empty());
}

#[test]
fn lower_group_priority_goes_first_within_a_group() {
    let mut jobs = table(4);
    let mut g = Groups::default();
    let a = gid("A");
    g.push(&mut jobs, &a, 0, (5, 1));
    g.push(&mut jobs, &a, 1, (0, 2));
    g.push(&mut jobs, &a, 2, (1, 3));
    g.push(&mut jobs, &a, 3, (0, 4));
    assert_eq!(take_all(&mut g, &mut jobs, NONE, 0), vec![1, 3, 2, 0]);
}

#[test]
fn a_group_at_its_concurrency_is_parked_while_others_run() {
    let mut jobs = table(20);
    let mut g = Groups::default();
    let (a, b) = (gid("A"), gid("B"));
    for k in 0..10 {
        g.push(&mut jobs, &a, k, (0, k as i64));
        g.push(&mut jobs, &b, 10 + k, (0, 10 + k as i64));
    }
    let one = GroupDefaults {
        concurrency: Some(1),
        rate: None,
    };
    assert_eq!(take_all(&mut g, &mut jobs, one, 0), vec![0, 10]);
    assert!(g.held_back(one, 0));
    // A's job finishes: A takes its turn again, B stays parked.
    assert!(g.finished("A"));
    assert_eq!(take_all(&mut g, &mut jobs, one, 0), vec![1]);
    // A group's own concurrency overrides the worker's default.
    assert!(g.change("B", GroupChange::Concurrency(Some(3))));
    assert_eq!(take_all(&mut g, &mut jobs, one, 0), vec![11, 12]);
    assert_eq!(g.info("B").map(|i| (i.active, i.waiting)), Some((3, 7)));
}

#[test]
fn a_paused_group_is_skipped_until_resumed() {
    let mut jobs = table(4);
    let mut g = Groups::default();
    let (a, b) = (gid("A"), gid("B"));
    assert!(g.change("A", GroupChange::Paused(true)));
    assert!(!g.change("A", GroupChange::Paused(true)), "already paused");
    g.push(&mut jobs, &a, 0, (0, 0));
    g.push(&mut jobs, &a, 1, (0, 1));
    g.push(&mut jobs, &b, 2, (0, 2));
    assert_eq!(take_all(&mut g, &mut jobs, NONE, 0), vec![2]);
    assert!(g.held_back(NONE, 0));
    assert!(g.change("A", GroupChange::Paused(false)));
    assert!(!g.change("A", GroupChange::Paused(false)), "not paused");
    assert_eq!(take_all(&mut g, &mut jobs, NONE, 0), vec![0, 1]);
}

#[test]
fn a_rate_limited_group_waits_for_its_next_token_alone() {
    let mut jobs = table(10);
    let mut g = Groups::default();
    let (a, b) = (gid("A"), gid("B"));
    for k in 0..5 {
        g.push(&mut jobs, &a, k, (0, k as i64));
        g.push(&mut jobs, &b, 5 + k, (0, 5 + k as i64));
    }
    let two_per_second = RateLimit {
        max: 2,
        duration: 1_000,
    };
    g.change("A", GroupChange::Rate(Some(two_per_second)));
    assert_eq!(
        take_all(&mut g, &mut jobs, NONE, 0),
        vec![0, 5, 1, 6, 7, 8, 9]
    );
    assert_eq!(g.next_token_at(), Some(500));
    assert!(g.held_back(NONE, 499));
    assert!(!g.held_back(NONE, 500));
    assert_eq!(take_all(&mut g, &mut jobs, NONE, 499), Vec::<JobKey>::new());
    assert_eq!(take_all(&mut g, &mut jobs, NONE, 500), vec![2]);
    assert_eq!(take_all(&mut g, &mut jobs, NONE, 1_500), vec![3, 4]);
}

#[test]
fn records_of_groups_holding_nothing_go() {
    let mut jobs = table(2);
    let mut g = Groups::default();
    let a = gid("A");
    g.push(&mut jobs, &a, 0, (0, 0));
    g.push(&mut jobs, &a, 1, (0, 1));
    assert_eq!(g.remove(&mut jobs, "A", 1), Some((0, 1)));
    assert_eq!(take_all(&mut g, &mut jobs, NONE, 0), vec![0]);
    assert!(g.info("A").is_some(), "an active job keeps it");
    g.finished("A");
    assert_eq!(g.info("A"), None);
    assert!(g.map.is_empty() && g.ring.is_empty());
    g.change("A", GroupChange::Concurrency(Some(2)));
    assert!(g.info("A").is_some(), "settings keep it");
    g.change("A", GroupChange::Concurrency(None));
    assert_eq!(g.info("A"), None);
    assert_eq!(g.take_changes().len(), 2);
}

/// A simple model: per group, its ready jobs by `(priority, order)`, its active jobs, its cap
/// and whether it is paused.
#[derive(Default)]
struct Model {
    ready: BTreeMap<u8, BTreeMap<(u32, i64), JobKey>>,
    active: HashMap<u8, Vec<JobKey>>,
    cap: HashMap<u8, u32>,
    paused: HashMap<u8, bool>,
}

impl Model {
    fn eligible(&self, g: u8) -> bool {
        let active = self.active.get(&g).map_or(0, Vec::len) as u32;
        !self.paused.get(&g).copied().unwrap_or(false)
            && self.cap.get(&g).is_none_or(|c| active < *c)
            && self.ready.get(&g).is_some_and(|r| !r.is_empty())
    }
}

fn name(g: u8) -> String {
    format!("g{g}")
}

proptest! {
    /// Against the model, under random pushes, removals, takes, finishes, caps and pauses: a
    /// take gives the head of its group, and gives nothing only when no group may start a job;
    /// no group passes its cap; the ready count matches.
    #[test]
    fn takes_agree_with_a_model(ops in proptest::collection::vec((0u8..7, 0u8..4, 0u32..3), 0..400)) {
        let mut jobs = table(400);
        let mut g = Groups::default();
        let mut m = Model::default();
        let mut next_key = 0u64;
        let mut where_is: HashMap<JobKey, u8> = HashMap::new();
        for (op, grp, n) in ops {
            match op {
                0 | 1 => {
                    let key = next_key;
                    next_key += 1;
                    let prio = (n % 2, key as i64);
                    if let Some(j) = jobs.get_mut(&key) {
                        j.priority = prio.0;
                    }
                    g.push(&mut jobs, &Arc::from(name(grp)), key, prio);
                    m.ready.entry(grp).or_default().insert(prio, key);
                    where_is.insert(key, grp);
                }
                2 => {
                    let first = m.ready.get(&grp).and_then(|r| r.iter().nth(n as usize).map(|(p, k)| (*p, *k)));
                    if let Some((p, k)) = first {
                        prop_assert_eq!(g.remove(&mut jobs, &name(grp), k), Some(p));
                        m.ready.get_mut(&grp).map(|r| r.remove(&p));
                    }
                }
                3 => {
                    let got = g.next(&mut jobs, NONE, 0);
                    match got {
                        Some((k, p)) => {
                            let grp = where_is[&k];
                            prop_assert!(m.eligible(grp));
                            let head = m.ready.get_mut(&grp).and_then(|r| r.pop_first());
                            prop_assert_eq!(head, Some((p, k)));
                            m.active.entry(grp).or_default().push(k);
                        }
                        None => {
                            let any = (0..4).any(|x| m.eligible(x));
                            prop_assert!(!any, "nothing taken though a group may start a job");
                        }
                    }
                }
                4 => {
                    if let Some(k) = m.active.get_mut(&grp).and_then(|a| a.pop()) {
                        let _ = k;
                        g.finished(&name(grp));
                    }
                }
                5 => {
                    let cap = (n > 0).then_some(n);
                    g.change(&name(grp), GroupChange::Concurrency(cap));
                    match cap {
                        Some(c) => m.cap.insert(grp, c),
                        None => m.cap.remove(&grp),
                    };
                }
                _ => {
                    let p = n == 0;
                    g.change(&name(grp), GroupChange::Paused(p));
                    m.paused.insert(grp, p);
                }
            }
            let ready: usize = m.ready.values().map(BTreeMap::len).sum();
            prop_assert_eq!(g.len(), ready);
            for x in 0..4u8 {
                let active = m.active.get(&x).map_or(0, Vec::len) as u32;
                let info = g.info(&name(x)).unwrap_or_default();
                prop_assert_eq!(info.active, active);
                prop_assert_eq!(info.waiting, m.ready.get(&x).map_or(0, BTreeMap::len));
            }
        }
    }

    /// Without limits, takes are round-robin: at every point, the groups that still have ready
    /// jobs have been served within one job of each other.
    #[test]
    fn unlimited_takes_are_round_robin(sizes in proptest::collection::vec(1usize..30, 1..8)) {
        let total: usize = sizes.iter().sum();
        let mut jobs = table(total as u64);
        let mut g = Groups::default();
        let mut key = 0u64;
        let mut owner = HashMap::new();
        for (i, n) in sizes.iter().enumerate() {
            for _ in 0..*n {
                g.push(&mut jobs, &Arc::from(name(i as u8)), key, (0, key as i64));
                owner.insert(key, i);
                key += 1;
            }
        }
        let mut served = vec![0usize; sizes.len()];
        while let Some((k, _)) = g.next(&mut jobs, NONE, 0) {
            served[owner[&k]] += 1;
            let open: Vec<usize> = (0..sizes.len()).filter(|&i| served[i] < sizes[i]).map(|i| served[i]).collect();
            if let (Some(lo), Some(hi)) = (open.iter().min(), open.iter().max()) {
                prop_assert!(hi - lo <= 1, "served {:?}", served);
            }
        }
        prop_assert_eq!(served, sizes);
    }
}
