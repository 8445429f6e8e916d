# Mutation check of persistence that records itself (not part of npm test; ~15 min): each mutant
# removes or weakens one recording (a job change's parts, a settings or wipe flag, an evicted-row
# op, one kind of row op, a JobStore record), then the storage tests (the reopen property test
# among them) must fail. Survivors are listed; a survivor is either a recording the same
# operation already made (an equivalent mutant) or a gap in the tests.
#   python3 scripts/mutate_recording.py [mutant number]      (from the repository root)
# Builds in target/mut without LTO; restores every file it mutates.
import re, subprocess, sys, pathlib
root = pathlib.Path('.')
Q = 'crates/engine/src/domain/queue/'
muts = []
# every job change: its parts -> 0 (recorded as nothing)
for f in ['ack.rs','admin.rs','evicted.rs','mod.rs','rebuild.rs']:
    text = (root/(Q+f)).read_text()
    for m in re.finditer(r'\.change\(&key, ([A-Z |a-z]+)\)', text):
        muts.append((Q+f, m.start(1), m.end(1), '0', f'{f}:{text[:m.start()].count(chr(10))+1} change parts -> 0'))
def lit(path, old, new, label):
    t = (root/path).read_text()
    i = t.index(old)
    muts.append((path, i, i+len(old), new, label))
lit(Q+'ack.rs', 'let what = if extra_changes { STATE | EXTRA } else { STATE };', 'let what = STATE;', 'ack: never records EXTRA')
lit(Q+'mod.rs', 'self.settings_changed |= self.jobs.persists();', '', 'set_paused not recorded')
lit(Q+'admin.rs', 'fresh.wiped = fresh.jobs.persists();', 'fresh.wiped = false;', 'obliterate: no wipe')
lit(Q+'admin.rs', 'fresh.settings_changed = fresh.jobs.persists();', 'fresh.settings_changed = false;', 'obliterate: settings not written')
lit(Q+'evicted.rs', 'self.evicted_ops.push(op);', 'drop(op);', 'evicted ops dropped')
R = 'crates/engine/src/storage/rows.rs'
lit(R, 'out.push(StorageOp::Wipe(name.clone()));', '', 'rows: no Wipe op')
lit(R, 'let mut queue_row = settings || wiped || !evicted.is_empty();', 'let mut queue_row = false;', 'rows: queue row only on deletions')
lit(R, 'queue_row |= push_job_ops(q, &name, jobs, out);', 'push_job_ops(q, &name, jobs, out);', 'rows: deletions do not write the queue row')
lit(R, 'out.push(StorageOp::Delete(name.clone(), k));', '', 'rows: no Delete op')
lit(R, 'out.push(StorageOp::Insert(name.clone(), Box::new(job_row(q, job))));', '', 'rows: no Insert op')
lit(R, 'out.push(StorageOp::State(name.clone(), k, state_cols(q, job)));', '', 'rows: no State op')
lit(R, 'out.push(StorageOp::Extra(name.clone(), k, Box::new(extra_cols(job))));', '', 'rows: no Extra op')
lit(R, 'out.push(StorageOp::Data(name.clone(), k, job.data.clone()));', '', 'rows: no Data op')
J = 'crates/engine/src/domain/job_store.rs'
lit(J, 'self.record(key, NEW);', '', 'JobStore.insert not recorded')
lit(J, 'self.record(*key, 0);\n        self.table.remove(key)', 'self.table.remove(key)', 'JobStore.remove not recorded')
lit(J, 'self.record(*key, columns);', '', 'JobStore.change not recorded')
only = sys.argv[1:] and int(sys.argv[1])
results = []
for n, (path, a, b, new, label) in enumerate(muts):
    if only and n != only: continue
    p = root/path; orig = p.read_text()
    p.write_text(orig[:a] + new + orig[b:])
    try:
        r = subprocess.run(['cargo','test','-q','--release','-p','ferroqueue-engine','--lib','storage::'],
                           capture_output=True, text=True, timeout=900, env=dict(__import__('os').environ, CARGO_PROFILE_RELEASE_LTO='false', CARGO_PROFILE_RELEASE_CODEGEN_UNITS='16', CARGO_PROFILE_RELEASE_INCREMENTAL='true', CARGO_TARGET_DIR='target/mut'))
        out = r.stdout + r.stderr
        if 'error[' in out or 'could not compile' in out:
            verdict = 'does not compile'
        else:
            verdict = 'killed' if r.returncode != 0 else 'SURVIVED'
    finally:
        p.write_text(orig)
    results.append((label, verdict)); print(f'{n:2} {verdict:16} {label}', flush=True)
print(f"killed {sum(v=='killed' for _,v in results)} of {len(results)}")
