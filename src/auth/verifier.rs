//! The verifier: one thread per process that checks passwords against
//! bcrypt hashes, so a worker's event loop never spends a hash's ~60 ms
//! (cost 10; seconds at cost 16) while its other connections wait.
//!
//! A worker submits a job and awaits its answer (the request's task waits,
//! the worker serves the rest). At most [`QUEUE_JOBS`] jobs wait; past it
//! [`submit`] refuses at once and the request is answered 503 with
//! `Retry-After`. One thread: however many clients guess, hashing takes at
//! most one core of the machine. Started the first time a job comes (a
//! server without `[[auth]]` never starts it).

use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::OnceLock;

/// Jobs that may wait for the verifier.
pub const QUEUE_JOBS: usize = 32;

/// One password to check.
struct Job {
    hash: String,
    password: Vec<u8>,
    answer: flume::Sender<bool>,
}

/// Why a job was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Busy {
    /// The queue is full (or the thread could not start).
    Full,
}

/// A verifier thread and its queue; the thread ends when this is dropped
/// and its queue is done.
struct Verifier {
    jobs: SyncSender<Job>,
}

impl Verifier {
    fn start() -> std::io::Result<Verifier> {
        let (jobs, queue) = sync_channel(QUEUE_JOBS);
        std::thread::Builder::new()
            .name("servery-auth".into())
            .spawn(move || run(queue))?;
        Ok(Verifier { jobs })
    }

    fn submit(&self, hash: &str, password: Vec<u8>) -> Result<flume::Receiver<bool>, Busy> {
        let (answer, receiver) = flume::bounded(1);
        let job = Job {
            hash: hash.to_owned(),
            password,
            answer,
        };
        match self.jobs.try_send(job) {
            Ok(()) => Ok(receiver),
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => Err(Busy::Full),
        }
    }
}

/// The process's verifier, started at its first job.
fn global() -> Option<&'static Verifier> {
    static GLOBAL: OnceLock<Option<Verifier>> = OnceLock::new();
    GLOBAL
        .get_or_init(|| {
            Verifier::start()
                .map_err(|e| tracing::error!(error = %e, "cannot start the password verifier"))
                .ok()
        })
        .as_ref()
}

/// Queue `password` against `hash` for the process's verifier; the answer
/// comes on the receiver (`true`: it matches). Never blocks.
pub fn submit(hash: &str, password: Vec<u8>) -> Result<flume::Receiver<bool>, Busy> {
    global().ok_or(Busy::Full)?.submit(hash, password)
}

/// Check at once, on the caller's thread (`Files::handle`, which has no
/// task to wait in).
pub fn verify_here(hash: &str, password: &[u8]) -> bool {
    bcrypt::verify(password, hash).unwrap_or(false)
}

fn run(queue: Receiver<Job>) {
    for mut job in queue {
        let ok = verify_here(&job.hash, &job.password);
        job.password.fill(0);
        // The request may have gone; its answer is then dropped.
        let _ = job.answer.send(ok);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_come_back_from_the_thread() {
        let hash = "$2y$04$b48kF6D5GQVHgt.EHSBRLuFwaKn2HIFTebp8.iVFah805rIAmsJu2";
        let yes = submit(hash, b"secret".to_vec()).unwrap();
        let no = submit(hash, b"guess".to_vec()).unwrap();
        assert!(yes.recv().unwrap());
        assert!(!no.recv().unwrap());
        assert!(!verify_here("not a hash", b"secret"));
    }

    #[test]
    fn the_queue_refuses_past_its_bound() {
        // A verifier of its own (the process's serves the other tests).
        // Cost 10: ~60 ms a job, so the thread finishes none while the
        // loop below submits (microseconds).
        let verifier = Verifier::start().unwrap();
        let hash = bcrypt::hash("x", 10).unwrap();
        let answers: Vec<_> = (0..QUEUE_JOBS + 64)
            .map(|_| verifier.submit(&hash, b"guess".to_vec()))
            .collect();
        let refused = answers.iter().filter(|a| a.is_err()).count();
        // 33 at most taken at once; the thread would have to finish 56 jobs
        // (over 3 s) during the loop for fewer than 8 to be refused.
        assert!(refused >= 8, "{refused} of {} refused", answers.len());
        assert!(answers
            .iter()
            .all(|a| a.is_ok() || *a.as_ref().unwrap_err() == Busy::Full));
    }
}
