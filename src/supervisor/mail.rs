//! The inboxes through which workers hand each other QUIC datagrams
//! (`worker::quic::forward` says when and why).
//!
//! Owns: making a generation's inboxes (one Unix datagram socket pair per
//! worker slot, with the generation's resources, so they close with them),
//! and telling each new worker which inbox is its own and which it may send
//! to: every slot of its own generation and of each older generation still
//! alive, each labelled with the owner its connection IDs name. Does not
//! own reading or sending (the workers').

use std::io;
use std::os::unix::net::UnixDatagram;
use std::sync::{Arc, OnceLock, Weak};

use crate::quic::cid::Owner;

/// One generation's inboxes.
#[derive(Debug)]
pub(crate) struct Mail {
    /// Set when its first worker is spawned.
    generation: OnceLock<u64>,
    /// Per slot: the worker's end, and the end others send to.
    boxes: Vec<(UnixDatagram, UnixDatagram)>,
}

impl Mail {
    /// Inboxes for `workers` slots.
    pub(crate) fn new(workers: usize) -> io::Result<Arc<Mail>> {
        let boxes = (0..workers)
            .map(|_| UnixDatagram::pair())
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Arc::new(Mail {
            generation: OnceLock::new(),
            boxes,
        }))
    }
}

/// Every generation's inboxes while it lives (the resources hold them).
#[derive(Debug, Default)]
pub(crate) struct Office {
    generations: Vec<Weak<Mail>>,
}

/// What one worker gets.
pub(crate) struct Delivery {
    pub inbox: UnixDatagram,
    pub post: Vec<(Owner, UnixDatagram)>,
}

impl Office {
    /// The inbox of worker `slot` of `generation`, whose inboxes are
    /// `mail`, and the inboxes it may send to.
    pub(crate) fn deliver(
        &mut self,
        mail: &Arc<Mail>,
        generation: u64,
        slot: usize,
    ) -> io::Result<Delivery> {
        mail.generation.get_or_init(|| generation);
        self.generations.retain(|m| m.strong_count() > 0);
        if !self
            .generations
            .iter()
            .any(|m| std::ptr::eq(m.as_ptr(), Arc::as_ptr(mail)))
        {
            self.generations.push(Arc::downgrade(mail));
        }
        let inbox = mail
            .boxes
            .get(slot)
            .ok_or_else(|| io::Error::other("no inbox for this slot"))?
            .0
            .try_clone()?;
        let mut post = Vec::new();
        for m in self.generations.iter().filter_map(Weak::upgrade) {
            let Some(&g) = m.generation.get() else {
                continue;
            };
            if g > generation {
                continue;
            }
            for (s, (_, send)) in m.boxes.iter().enumerate() {
                let owner = Owner {
                    slot: s as u8,
                    generation: g as u8,
                };
                post.push((owner, send.try_clone()?));
            }
        }
        Ok(Delivery { inbox, post })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_may_send_to_its_generation_and_older_live_ones() {
        let mut office = Office::default();
        let first = Mail::new(2).unwrap();
        let d = office.deliver(&first, 1, 0).unwrap();
        let owners: Vec<_> = d.post.iter().map(|(o, _)| (o.generation, o.slot)).collect();
        assert_eq!(owners, [(1, 0), (1, 1)]);
        let second = Mail::new(1).unwrap();
        let d = office.deliver(&second, 2, 0).unwrap();
        let owners: Vec<_> = d.post.iter().map(|(o, _)| (o.generation, o.slot)).collect();
        assert_eq!(owners, [(1, 0), (1, 1), (2, 0)]);
        // What is sent to generation 1's slot 1 reaches its inbox.
        let to = &d.post[1].1;
        to.send(b"datagram").unwrap();
        let mut buf = [0u8; 16];
        let theirs = office.deliver(&first, 1, 1).unwrap().inbox;
        assert_eq!(theirs.recv(&mut buf).unwrap(), 8);
        // A generation gone is no longer on anyone's list.
        drop(first);
        let d = office.deliver(&second, 2, 0).unwrap();
        assert_eq!(d.post.len(), 1);
    }
}
