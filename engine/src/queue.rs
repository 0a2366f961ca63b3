//! The model thread's queue: the commands sent to it, and which job runs next — newest wins per lane, cancelled
//! jobs are answered first and never win, interactive work before background work.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio::sync::oneshot;

use crate::error::EngineError;
use crate::request::{Completion, CompletionRequest, CompletionStats, StopReason};
use crate::state::{EngineConfig, EngineCounters};

pub(crate) enum Command {
    Complete(Job),
    Reload(EngineConfig),
    Shutdown,
}

pub(crate) struct Job {
    pub(crate) request: CompletionRequest,
    pub(crate) queued_at: Instant,
    pub(crate) reply: oneshot::Sender<Result<Completion, EngineError>>,
}

/// What the serve loop tells the outer loop when it returns.
pub(crate) enum Next {
    Load(EngineConfig),
    Stop,
}

/// Adds a job to the queue; returns what to do instead when the command is not a job.
pub(crate) fn enqueue(command: Command, queue: &mut Vec<Job>) -> Option<Next> {
    match command {
        Command::Complete(job) => {
            queue.push(job);
            None
        }
        Command::Reload(config) => Some(Next::Load(config)),
        Command::Shutdown => Some(Next::Stop),
    }
}

/// Picks the job to run: the newest of the oldest lane. Cancelled jobs are answered first and never supersede: a
/// warm-up is queued from its own task, so it can reach the queue after the request that cancelled it, and as
/// "newest" it would take that request's place. Older live jobs of every lane are answered as superseded. A
/// background job never supersedes an interactive one: it is dropped when its lane has an interactive job (which
/// brings the same prompt into the cache anyway), however late it was queued.
pub(crate) fn take_newest(queue: &mut Vec<Job>, counters: &EngineCounters) -> Option<Job> {
    let mut live = Vec::new();
    for job in queue.drain(..) {
        if job.request.cancel.is_cancelled() || job.reply.is_closed() {
            counters.cancelled.fetch_add(1, Ordering::Relaxed);
            let _ = job.reply.send(Ok(empty(StopReason::Cancelled)));
        } else {
            live.push(job);
        }
    }
    let mut newest_interactive: HashMap<u64, usize> = HashMap::new();
    let mut newest_background: HashMap<u64, usize> = HashMap::new();
    for (idx, job) in live.iter().enumerate() {
        let newest = if job.request.background { &mut newest_background } else { &mut newest_interactive };
        newest.insert(job.request.lane, idx);
    }
    for (idx, job) in live.into_iter().enumerate() {
        let lane = job.request.lane;
        let keep = if job.request.background {
            !newest_interactive.contains_key(&lane) && newest_background.get(&lane) == Some(&idx)
        } else {
            newest_interactive.get(&lane) == Some(&idx)
        };
        if keep {
            queue.push(job);
        } else {
            counters.superseded.fetch_add(1, Ordering::Relaxed);
            let _ = job.reply.send(Ok(empty(StopReason::Superseded)));
        }
    }
    if queue.is_empty() {
        return None;
    }
    // Interactive jobs first, oldest lane first; a background job runs only when nothing else waits.
    let idx = queue.iter().position(|job| !job.request.background).unwrap_or(0);
    Some(queue.remove(idx))
}

pub(crate) fn answer_all(queue: Vec<Job>, error: EngineError) {
    for job in queue {
        let _ = job.reply.send(Err(error.clone()));
    }
}

pub(crate) fn empty(stop: StopReason) -> Completion {
    Completion { text: String::new(), stop, stats: CompletionStats::default() }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use crate::session::fake::FakeModel;
    use crate::session::Session;

    fn job(lane: u64, prefix: &str) -> (Job, oneshot::Receiver<Result<Completion, EngineError>>) {
        let (reply, answer) = oneshot::channel();
        (Job { request: crate::request::test_ghost(lane, prefix), queued_at: Instant::now(), reply }, answer)
    }

    #[test]
    fn a_background_job_queued_late_never_supersedes_a_keystroke() {
        let counters = EngineCounters::default();
        let (keystroke, _keystroke_answer) = job(1, "fn a() {");
        let (mut warm_up, _warm_up_answer) = job(1, "fn a() {}");
        warm_up.request.background = true;
        let (mut other_warm_up, _other_answer) = job(2, "x");
        other_warm_up.request.background = true;
        let mut queue = vec![keystroke, warm_up, other_warm_up];
        let first = take_newest(&mut queue, &counters).unwrap();
        assert_eq!((first.request.lane, first.request.background), (1, false));
        assert_eq!(counters.superseded.load(Ordering::Relaxed), 1, "the lane's late background job was dropped");
        let second = take_newest(&mut queue, &counters).unwrap();
        assert_eq!((second.request.lane, second.request.background), (2, true));
    }

    #[test]
    fn interactive_jobs_run_before_background_ones() {
        let counters = EngineCounters::default();
        let (mut prefetch, _prefetch_answer) = job(1, "a");
        prefetch.request.background = true;
        let (keystroke, _keystroke_answer) = job(2, "b");
        let mut queue = vec![prefetch, keystroke];
        assert_eq!(take_newest(&mut queue, &counters).map(|job| job.request.lane), Some(2));
        assert_eq!(take_newest(&mut queue, &counters).map(|job| job.request.lane), Some(1));
        assert!(take_newest(&mut queue, &counters).is_none());
    }

    #[test]
    fn newest_job_of_a_lane_wins_and_every_job_is_answered() {
        let (sender, receiver) = mpsc::channel();
        let mut answers = Vec::new();
        for (lane, prefix) in [(1, "a"), (1, "ab"), (2, "x"), (1, "abc")] {
            let (job, answer) = job(lane, prefix);
            sender.send(Command::Complete(job)).unwrap();
            answers.push(answer);
        }
        sender.send(Command::Shutdown).unwrap();
        let counters = EngineCounters::default();
        let mut session = Session::new(FakeModel::new("zz"), None);
        // The loop drains all four jobs at once, runs the newest of each lane, then sees Shutdown.
        let (first, _first_answer) = job(3, "warm");
        let mut queue = vec![first];
        while let Ok(command) = receiver.try_recv() {
            if enqueue(command, &mut queue).is_some() {
                break;
            }
        }
        let mut ran = Vec::new();
        while let Some(job) = take_newest(&mut queue, &counters) {
            ran.push(job.request.prefix.clone());
            let result = session.complete(&job.request, job.queued_at);
            let _ = job.reply.send(result);
        }
        assert_eq!(ran, vec!["warm", "x", "abc"]);
        let stops: Vec<StopReason> =
            answers.into_iter().map(|mut answer| answer.try_recv().unwrap().unwrap().stop).collect();
        assert_eq!(stops[0], StopReason::Superseded);
        assert_eq!(stops[1], StopReason::Superseded);
        assert_ne!(stops[2], StopReason::Superseded);
        assert_ne!(stops[3], StopReason::Superseded);
        assert_eq!(counters.superseded.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_cancelled_warm_up_queued_after_the_request_that_cancelled_it_does_not_supersede_it() {
        // The order the server can produce: the ghost-text request's job is sent from its handler, the warm-up's
        // from a task spawned earlier that ran later; the request cancelled the warm-up before sending its job.
        let (request, request_answer) = job(7, "fn main() {");
        let (mut warm_up, mut warm_up_answer) = job(7, "fn main");
        warm_up.request.max_tokens = 0;
        warm_up.request.cancel.cancel();
        let counters = EngineCounters::default();
        let mut queue = vec![request, warm_up];
        let picked = take_newest(&mut queue, &counters).expect("the live request runs");
        assert_eq!(picked.request.prefix, "fn main() {");
        assert!(queue.is_empty());
        assert_eq!(warm_up_answer.try_recv().unwrap().unwrap().stop, StopReason::Cancelled);
        assert_eq!(counters.superseded.load(Ordering::Relaxed), 0);
        assert_eq!(counters.cancelled.load(Ordering::Relaxed), 1);
        drop((picked, request_answer));
    }
}
