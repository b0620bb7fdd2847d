//! Connection IDs that name the worker owning their connection.
//!
//! A server chooses the destination connection ID of every packet a client
//! sends after its first flight (RFC 9000 §5.1), so an ID that carries the
//! owning worker's slot lets the kernel steer the datagram (`steer`) before
//! any worker reads it. The slot and the generation are in the clear, as in
//! Envoy's and nginx's routing: an observer learns which worker serves a
//! connection, not which packets belong together (the rest of the ID is
//! random, 64 bits of it, fresh for every ID).

use std::time::Duration;

use quinn_proto::{ConnectionId, ConnectionIdGenerator, InvalidCid};
use ring::rand::{SecureRandom, SystemRandom};

/// Bytes in each of our connection IDs: slot, generation, 8 random.
pub const CID_LEN: usize = 10;
/// Where the slot is in an ID.
pub const SLOT_AT: usize = 0;
/// Where the generation is in an ID.
pub const GENERATION_AT: usize = 1;
/// The most workers a UDP port's group can route to: the slot is a byte.
pub const MAX_SLOTS: usize = 256;

/// Who owns a connection, as its ID says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub slot: u8,
    /// The low 8 bits of the generation that issued the ID.
    pub generation: u8,
}

impl Owner {
    /// The owner an ID of ours names; `None` for an ID of another length
    /// (a client's own, in its first packets).
    pub fn of(cid: &[u8]) -> Option<Owner> {
        (cid.len() == CID_LEN).then(|| Owner {
            slot: cid[SLOT_AT],
            generation: cid[GENERATION_AT],
        })
    }
}

/// The connection IDs of one worker's endpoint.
#[derive(Debug)]
pub struct WorkerCids {
    owner: Owner,
    lifetime: Option<Duration>,
    rng: SystemRandom,
}

impl WorkerCids {
    /// IDs for the worker in `slot` of generation `generation` (only its
    /// low 8 bits are kept). `None` past [`MAX_SLOTS`].
    pub fn new(slot: usize, generation: u64) -> Option<WorkerCids> {
        Some(WorkerCids {
            owner: Owner {
                slot: u8::try_from(slot).ok()?,
                generation: generation as u8,
            },
            lifetime: None,
            rng: SystemRandom::new(),
        })
    }
}

impl ConnectionIdGenerator for WorkerCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut id = [0u8; CID_LEN];
        id[SLOT_AT] = self.owner.slot;
        id[GENERATION_AT] = self.owner.generation;
        if self.rng.fill(&mut id[2..]).is_err() {
            // The system's random source failing is not something a
            // connection can go on without.
            panic!("the system random source failed");
        }
        ConnectionId::new(&id)
    }

    /// An ID of another worker or generation is not this endpoint's: the
    /// datagram was misrouted (or forged), and no connection here has it.
    fn validate(&self, cid: &ConnectionId) -> Result<(), InvalidCid> {
        match Owner::of(cid) {
            Some(owner) if owner == self.owner => Ok(()),
            _ => Err(InvalidCid),
        }
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        self.lifetime
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_names_its_worker_and_generation_and_is_otherwise_random() {
        let mut cids = WorkerCids::new(7, 258).unwrap();
        let a = cids.generate_cid();
        let b = cids.generate_cid();
        assert_eq!(a.len(), CID_LEN);
        let owner = Owner::of(&a).unwrap();
        assert_eq!(
            owner,
            Owner {
                slot: 7,
                generation: 2
            }
        );
        assert_eq!(Owner::of(&b), Some(owner));
        assert_ne!(a[2..], b[2..], "fresh random bytes for every ID");
        assert!(cids.validate(&a).is_ok());
    }

    #[test]
    fn ids_of_other_workers_generations_or_lengths_are_not_ours() {
        let cids = WorkerCids::new(1, 0).unwrap();
        let other_slot = WorkerCids::new(2, 0).unwrap().generate_cid_once();
        let other_generation = WorkerCids::new(1, 1).unwrap().generate_cid_once();
        assert!(cids.validate(&other_slot).is_err());
        assert!(cids.validate(&other_generation).is_err());
        assert!(cids
            .validate(&ConnectionId::new(&[1, 0, 0, 0, 0, 0, 0, 0]))
            .is_err());
        assert_eq!(Owner::of(&[1; 8]), None);
    }

    #[test]
    fn a_slot_past_a_byte_is_refused() {
        assert!(WorkerCids::new(MAX_SLOTS - 1, 0).is_some());
        assert!(WorkerCids::new(MAX_SLOTS, 0).is_none());
    }

    impl WorkerCids {
        fn generate_cid_once(mut self) -> ConnectionId {
            self.generate_cid()
        }
    }
}
