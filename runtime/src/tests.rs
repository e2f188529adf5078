// SPDX-License-Identifier: Apache-2.0
//! One test per runtime rule; each fails if its rule is removed.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::*;
use model::kinds::Kind;
use model::resource::{ConfigLayer, HostnameSpec, Namespace, Phase};

type Body = Box<dyn FnMut(&mut Ctx<'_>) -> Result<Next, ControllerError>>;

struct TestCtrl {
    name: &'static str,
    inputs: Vec<Input>,
    outputs: Vec<Output>,
    runs: Rc<Cell<u32>>,
    body: Body,
}

impl Controller for TestCtrl {
    fn name(&self) -> &'static str {
        self.name
    }
    fn inputs(&self) -> Vec<Input> {
        self.inputs.clone()
    }
    fn outputs(&self) -> Vec<Output> {
        self.outputs.clone()
    }
    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        self.runs.set(self.runs.get() + 1);
        (self.body)(ctx)
    }
}

fn ctrl(
    name: &'static str,
    inputs: &[Input],
    outputs: &[Output],
    body: impl FnMut(&mut Ctx<'_>) -> Result<Next, ControllerError> + 'static,
) -> (Box<dyn Controller>, Rc<Cell<u32>>) {
    let runs = Rc::new(Cell::new(0));
    let c = TestCtrl {
        name,
        inputs: inputs.to_vec(),
        outputs: outputs.to_vec(),
        runs: runs.clone(),
        body: Box::new(body),
    };
    (Box::new(c), runs)
}

fn host(name: &str) -> HostnameSpec {
    HostnameSpec { hostname: name.into(), domainname: String::new(), layer: ConfigLayer::Default }
}

const NC: Namespace = Namespace::NetworkConfig;
const NET: Namespace = Namespace::Network;
const HOST_IN: Input = Input::strong(NC, Kind::HostnameSpec);
const HOST_OUT: Output = Output::shared(NC, Kind::HostnameSpec);
const HOST_NET_OUT: Output = Output::shared(NET, Kind::HostnameSpec);

fn reader(name: &'static str) -> (Box<dyn Controller>, Rc<Cell<u32>>) {
    ctrl(name, &[HOST_IN], &[], |_| Ok(Next::Idle))
}

#[test]
fn equal_writes_wake_nobody() {
    let mut rt = Runtime::new();
    let (w, _) = ctrl(
        "writer",
        &[Input::weak(Namespace::Config, Kind::MachineConfig)],
        &[HOST_OUT],
        |ctx| {
            ctx.put(NC, "a", host("same"))?;
            Ok(Next::Idle)
        },
    );
    let (r, reads) = reader("reader");
    rt.register(w).unwrap();
    rt.register(r).unwrap();
    let now = Instant::now();
    rt.run(now);
    let after_first = reads.get();
    // Wake the writer again: it writes the same spec, so the reader must stay asleep.
    rt.put_input("test", Namespace::Config, "v1alpha1", model::config::MachineConfig::default())
        .unwrap();
    let report = rt.run(now);
    assert_eq!(report.reconciles, 1, "only the writer ran");
    assert_eq!(reads.get(), after_first);
    assert_eq!(rt.store().get(NC, Kind::HostnameSpec, "a").unwrap().metadata.version, 1);
}

#[test]
fn dirty_marking_is_coalesced() {
    let mut rt = Runtime::new();
    let (w, _) = ctrl("writer", &[], &[HOST_OUT], |ctx| {
        for i in 0..100 {
            ctx.put(NC, &format!("h{i:03}"), host("x"))?;
        }
        Ok(Next::Idle)
    });
    let (r, reads) = ctrl("reader", &[HOST_IN], &[], |_| Ok(Next::Idle));
    // Register the reader first so its initial run happens before the writer's 100 changes.
    rt.register(r).unwrap();
    rt.register(w).unwrap();
    rt.run(Instant::now());
    assert_eq!(reads.get(), 2, "initial run plus one run for 100 changes");
}

#[test]
fn only_owners_write() {
    let mut rt = Runtime::new();
    let (a, _) = ctrl("a", &[], &[HOST_OUT], |ctx| {
        ctx.put(NC, "x", host("mine"))?;
        Ok(Next::Idle)
    });
    let (b, _) = ctrl("b", &[], &[HOST_OUT], |ctx| {
        ctx.put(NC, "x", host("stolen"))?;
        Ok(Next::Idle)
    });
    rt.register(a).unwrap();
    rt.register(b).unwrap();
    rt.run(Instant::now());
    assert_eq!(rt.store().get_spec::<HostnameSpec>(NC, "x").unwrap().hostname, "mine");
    let b_state = &rt.controllers()[1];
    assert!(b_state.last_error.as_deref().unwrap().contains("owned by a"), "{b_state:?}");
}

#[test]
fn undeclared_outputs_are_refused() {
    let mut rt = Runtime::new();
    let (a, _) = ctrl("a", &[], &[], |ctx| {
        ctx.put(NC, "x", host("x"))?;
        Ok(Next::Idle)
    });
    rt.register(a).unwrap();
    rt.run(Instant::now());
    assert!(rt.store().is_empty());
    assert!(rt.controllers()[0].last_error.as_deref().unwrap().contains("not one of its outputs"));
}

#[test]
fn exclusive_outputs_conflict_at_registration() {
    let mut rt = Runtime::new();
    let (a, _) = ctrl("a", &[], &[Output::exclusive(NC, Kind::HostnameSpec)], |_| Ok(Next::Idle));
    let (b, _) = ctrl("b", &[], &[HOST_OUT], |_| Ok(Next::Idle));
    let (a2, _) = ctrl("a", &[], &[], |_| Ok(Next::Idle));
    rt.register(a).unwrap();
    assert!(matches!(rt.register(b), Err(RuntimeError::OutputConflict { .. })));
    assert_eq!(rt.register(a2), Err(RuntimeError::DuplicateName("a")));
}

#[test]
fn loops_hit_the_cap_and_are_named() {
    let mut rt = Runtime::new();
    // ping writes network-config from network, pong writes network from network-config: each
    // write changes a counter, so they wake each other forever.
    let (ping, _) = ctrl("ping", &[Input::strong(NET, Kind::HostnameSpec)], &[HOST_OUT], |ctx| {
        let n = ctx.get::<HostnameSpec>(NET, "p").map_or(0, |h| h.hostname.len());
        ctx.put(NC, "p", host(&"x".repeat(n + 1)))?;
        Ok(Next::Idle)
    });
    let (pong, _) = ctrl("pong", &[HOST_IN], &[HOST_NET_OUT], |ctx| {
        let n = ctx.get::<HostnameSpec>(NC, "p").map_or(0, |h| h.hostname.len());
        ctx.put(NET, "p", host(&"x".repeat(n + 1)))?;
        Ok(Next::Idle)
    });
    let (bystander, by_runs) = ctrl("bystander", &[], &[], |_| Ok(Next::Idle));
    rt.register(ping).unwrap();
    rt.register(pong).unwrap();
    rt.register(bystander).unwrap();
    let now = Instant::now();
    let report = rt.run(now);
    assert_eq!(report.reconciles, PASS_CAP);
    assert_eq!(report.looping, ["ping", "pong"]);
    assert!(rt.poll_at().is_some_and(|t| t > now), "loopers are backed off, not spinning");
    // Whoever was starved by the loop still gets its turn.
    while rt.has_work() {
        rt.run(now);
    }
    assert_eq!(by_runs.get(), 1);
}

#[test]
fn errors_back_off_exponentially_and_success_resets() {
    let mut rt = Runtime::new();
    let fail = Rc::new(Cell::new(true));
    let f = fail.clone();
    let (c, runs) = ctrl("flaky", &[], &[], move |_| {
        if f.get() {
            Err(ControllerError::transient("link busy"))
        } else {
            Ok(Next::Idle)
        }
    });
    rt.register(c).unwrap();
    let t0 = Instant::now();
    rt.run(t0);
    assert_eq!(rt.poll_at(), Some(t0 + BACKOFF_INITIAL));
    rt.run(t0 + Duration::from_millis(100));
    assert_eq!(runs.get(), 1, "not retried before the backoff");
    let t1 = t0 + BACKOFF_INITIAL;
    rt.run(t1);
    assert_eq!(runs.get(), 2);
    assert_eq!(rt.poll_at(), Some(t1 + BACKOFF_INITIAL * 2), "delay doubled");
    fail.set(false);
    rt.run(t1 + BACKOFF_INITIAL * 2);
    assert_eq!(runs.get(), 3);
    assert_eq!(rt.poll_at(), None);
    assert_eq!(rt.controllers()[0].last_error, None);
    // The next failure starts from the initial delay again.
    fail.set(true);
    rt.mark_all_dirty();
    let t2 = t1 + Duration::from_secs(10);
    rt.run(t2);
    assert_eq!(rt.poll_at(), Some(t2 + BACKOFF_INITIAL));
}

#[test]
fn each_reconcile_is_counted_with_its_duration_and_failures_as_errors() {
    let mut rt = Runtime::new();
    let fail = Rc::new(Cell::new(true));
    let f = fail.clone();
    let (c, _) = ctrl("counted", &[], &[], move |_| {
        if f.get() {
            Err(ControllerError::transient("no"))
        } else {
            Ok(Next::Idle)
        }
    });
    rt.register(c).unwrap();
    let t0 = Instant::now();
    rt.run(t0);
    fail.set(false);
    rt.run(t0 + BACKOFF_INITIAL);
    let state = &rt.controllers()[0];
    assert_eq!((state.runs, state.errors), (2, 1));
    assert_eq!(state.durations.count(), 2);
}

#[test]
fn backoff_is_capped() {
    let mut rt = Runtime::new();
    let (c, _) = ctrl("broken", &[], &[], |_| Err(ControllerError::transient("no")));
    rt.register(c).unwrap();
    let mut t = Instant::now();
    for _ in 0..20 {
        rt.run(t);
        t = rt.poll_at().unwrap();
    }
    rt.run(t);
    assert_eq!(rt.poll_at(), Some(t + BACKOFF_MAX));
}

#[test]
fn panics_are_caught_and_retried() {
    let mut rt = Runtime::new();
    let (bad, bad_runs) = ctrl("bad", &[], &[], |_| panic!("boom"));
    let (good, good_runs) = ctrl("good", &[], &[], |_| Ok(Next::Idle));
    rt.register(bad).unwrap();
    rt.register(good).unwrap();
    let t0 = Instant::now();
    rt.run(t0);
    assert_eq!((bad_runs.get(), good_runs.get()), (1, 1));
    assert_eq!(rt.controllers()[0].last_error.as_deref(), Some("panicked: boom"));
    rt.run(t0 + BACKOFF_INITIAL);
    assert_eq!(bad_runs.get(), 2, "retried after the backoff");
}

#[test]
fn timers_wake_controllers() {
    let mut rt = Runtime::new();
    let t0 = Instant::now();
    let at = t0 + Duration::from_secs(5);
    let (c, runs) = ctrl("ticker", &[], &[], move |ctx| {
        Ok(if ctx.now() < at { Next::At(at) } else { Next::Idle })
    });
    rt.register(c).unwrap();
    rt.run(t0);
    assert_eq!(rt.poll_at(), Some(at));
    rt.run(t0 + Duration::from_secs(1));
    assert_eq!(runs.get(), 1);
    rt.run(at);
    assert_eq!(runs.get(), 2);
    assert_eq!(rt.poll_at(), None);
}

#[test]
fn finalizers_order_teardown() {
    let mut rt = Runtime::new();
    let want = Rc::new(Cell::new(true));
    let w = want.clone();
    // The owner writes `x` while wanted, and forgets it otherwise.
    let (owner, _) = ctrl(
        "owner",
        &[
            Input::weak(Namespace::Config, Kind::MachineConfig),
            Input::destroy_ready(NET, Kind::HostnameSpec),
        ],
        &[HOST_NET_OUT],
        move |ctx| {
            if w.get() {
                ctx.put(NET, "x", host("x"))?;
            }
            ctx.cleanup_untouched(NET, Kind::HostnameSpec)?;
            Ok(Next::Idle)
        },
    );
    // The applier holds a finalizer while `x` runs, and releases it once "the kernel object is
    // gone" (here: one reconcile after teardown starts).
    let (applier, applier_runs) =
        ctrl("applier", &[Input::strong(NET, Kind::HostnameSpec)], &[], |ctx| {
            let phase = ctx.resource(NET, Kind::HostnameSpec, "x").map(|r| r.metadata.phase);
            match phase {
                Some(Phase::Running) => ctx.add_finalizer(NET, Kind::HostnameSpec, "x")?,
                Some(Phase::TearingDown) => ctx.remove_finalizer(NET, Kind::HostnameSpec, "x")?,
                None => {}
            }
            Ok(Next::Idle)
        });
    rt.register(owner).unwrap();
    rt.register(applier).unwrap();
    let now = Instant::now();
    rt.run(now);
    let x = rt.store().get(NET, Kind::HostnameSpec, "x").unwrap();
    assert!(x.metadata.finalizers.contains("applier"));

    want.set(false);
    rt.put_input("test", Namespace::Config, "v1alpha1", model::config::MachineConfig::default())
        .unwrap();
    let before = applier_runs.get();
    rt.run(now);
    assert!(applier_runs.get() > before, "the applier saw the teardown");
    assert!(
        rt.store().get(NET, Kind::HostnameSpec, "x").is_none(),
        "owner destroyed it once released"
    );
    let journal: Vec<ChangeKind> =
        rt.take_changes().into_iter().filter(|c| &*c.id == "x").map(|c| c.what).collect();
    assert_eq!(
        journal,
        [
            ChangeKind::Created,
            ChangeKind::Finalizers,
            ChangeKind::TearingDown,
            ChangeKind::Finalizers,
            ChangeKind::Destroyed
        ]
    );
}

#[test]
fn own_finalizer_changes_wake_only_others() {
    let mut rt = Runtime::new();
    let (owner, _) = ctrl(
        "owner",
        &[Input::weak(Namespace::Config, Kind::MachineConfig)],
        &[HOST_NET_OUT],
        |ctx| {
            ctx.put(NET, "x", host("x"))?;
            Ok(Next::Idle)
        },
    );
    let (applier, applier_runs) =
        ctrl("applier", &[Input::strong(NET, Kind::HostnameSpec)], &[], |ctx| {
            ctx.add_finalizer(NET, Kind::HostnameSpec, "x")?;
            Ok(Next::Idle)
        });
    let (watcher, watcher_runs) =
        ctrl("watcher", &[Input::weak(NET, Kind::HostnameSpec)], &[], |_| Ok(Next::Idle));
    rt.register(owner).unwrap();
    rt.register(applier).unwrap();
    rt.register(watcher).unwrap();
    rt.run(Instant::now());
    let x = rt.store().get(NET, Kind::HostnameSpec, "x").unwrap();
    assert!(x.metadata.finalizers.contains("applier"));
    // The applier ran for `x` and not again for its own finalizer; the watcher, registered
    // after it, saw both changes in one run.
    assert_eq!(applier_runs.get(), 1);
    assert_eq!(watcher_runs.get(), 1);
    // Someone else's finalizer still wakes the applier.
    let ch = rt.store.add_finalizer(NET, Kind::HostnameSpec, "x", "other").unwrap().unwrap();
    rt.notify(&ch, None);
    rt.run(Instant::now());
    assert_eq!(applier_runs.get(), 2);
}

#[test]
fn input_changes_cut_a_backoff_short() {
    let mut rt = Runtime::new();
    let (c, runs) = ctrl("needs_input", &[HOST_IN], &[], |ctx| {
        if ctx.get::<HostnameSpec>(NC, "h").is_some() {
            Ok(Next::Idle)
        } else {
            Err(ControllerError::transient("waiting for h"))
        }
    });
    let (w, _) = ctrl(
        "writer",
        &[Input::weak(Namespace::Config, Kind::MachineConfig)],
        &[HOST_OUT],
        |ctx| {
            if ctx.get::<model::config::MachineConfig>(Namespace::Config, "x").is_some() {
                ctx.put(NC, "h", host("h"))?;
            }
            Ok(Next::Idle)
        },
    );
    rt.register(c).unwrap();
    rt.register(w).unwrap();
    let t0 = Instant::now();
    rt.run(t0);
    assert!(rt.poll_at().is_some(), "in backoff");
    rt.put_input("test", Namespace::Config, "x", model::config::MachineConfig::default()).unwrap();
    rt.run(t0 + Duration::from_millis(1));
    assert_eq!(runs.get(), 1, "never sooner than BACKOFF_INITIAL after the last run");
    assert_eq!(rt.poll_at(), Some(t0 + BACKOFF_INITIAL));
    rt.run(t0 + BACKOFF_INITIAL);
    assert_eq!(runs.get(), 2, "retried early because its input changed");
    assert_eq!(rt.controllers()[0].last_error, None);
}

#[test]
fn self_inflicted_events_cannot_spin_a_failing_controller() {
    let mut rt = Runtime::new();
    let (c, runs) =
        ctrl("flapper", &[HOST_IN], &[], |_| Err(ControllerError::transient("kernel says no")));
    rt.register(c).unwrap();
    let t0 = Instant::now();
    rt.run(t0);
    // Every attempt causes a kernel event, which marks it dirty again.
    for ms in 0..1000 {
        rt.mark_dirty(Kind::HostnameSpec);
        rt.run(t0 + Duration::from_millis(ms));
    }
    assert!(runs.get() <= 5, "at most one retry per BACKOFF_INITIAL, got {}", runs.get());
}

#[test]
fn the_journal_keeps_only_the_kinds_asked_for() {
    let mut rt = Runtime::new();
    rt.journal_only(Some(vec![Kind::MachineConfig]));
    rt.put_input("test", NET, "hostname", host("a")).unwrap();
    rt.put_input("test", Namespace::Config, "v1alpha1", model::config::MachineConfig::default())
        .unwrap();
    let kinds: Vec<Kind> = rt.take_changes().into_iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [Kind::MachineConfig]);

    rt.journal_only(None);
    rt.put_input("test", NET, "hostname", host("b")).unwrap();
    let kinds: Vec<Kind> = rt.take_changes().into_iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [Kind::HostnameSpec]);
}

/// A reconcile's changes wake every controller any of them concerns, however they are
/// interleaved: runs of alike changes are notified once, a change unlike the one before is
/// notified again.
#[test]
fn every_change_of_a_reconcile_wakes_its_readers() {
    let mut rt = Runtime::new();
    let armed = Rc::new(Cell::new(false));
    let arm = armed.clone();
    let (w, _) = ctrl(
        "writer",
        &[Input::weak(Namespace::Config, Kind::MachineConfig)],
        &[HOST_OUT, HOST_NET_OUT],
        move |ctx| {
            if arm.get() {
                for id in ["a", "b", "c"] {
                    ctx.put(NC, id, host(id))?;
                }
                ctx.put(NET, "n", host("n"))?;
                ctx.put(NC, "d", host("d"))?;
            }
            Ok(Next::Idle)
        },
    );
    let (r, reads) = reader("reader");
    let (n, net_reads) =
        ctrl("net-reader", &[Input::strong(NET, Kind::HostnameSpec)], &[], |_| Ok(Next::Idle));
    rt.register(w).unwrap();
    rt.register(r).unwrap();
    rt.register(n).unwrap();
    rt.run(Instant::now());
    assert_eq!((reads.get(), net_reads.get()), (1, 1));
    armed.set(true);
    rt.mark_dirty(Kind::MachineConfig);
    rt.run(Instant::now());
    assert_eq!((reads.get(), net_reads.get()), (2, 2));
    // Settled: nothing runs again.
    rt.run(Instant::now());
    assert_eq!((reads.get(), net_reads.get()), (2, 2));
}
