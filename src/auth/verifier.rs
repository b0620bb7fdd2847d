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

fn jobs() -> Option<&'static SyncSender<Job>> {
    static JOBS: OnceLock<Option<SyncSender<Job>>> = OnceLock::new();
    JOBS.get_or_init(|| {
        let (tx, rx) = sync_channel(QUEUE_JOBS);
        let started = std::thread::Builder::new()
            .name("servery-auth".into())
            .spawn(move || run(rx));
        match started {
            Ok(_) => Some(tx),
            Err(e) => {
                tracing::error!(error = %e, "cannot start the password verifier thread");
                None
            }
        }
    })
    .as_ref()
}

/// Queue `password` against `hash`; the answer comes on the receiver
/// (`true`: it matches). Never blocks.
pub fn submit(hash: &str, password: Vec<u8>) -> Result<flume::Receiver<bool>, Busy> {
    let jobs = jobs().ok_or(Busy::Full)?;
    let (answer, receiver) = flume::bounded(1);
    let job = Job {
        hash: hash.to_owned(),
        password,
        answer,
    };
    match jobs.try_send(job) {
        Ok(()) => Ok(receiver),
        Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => Err(Busy::Full),
    }
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
}
