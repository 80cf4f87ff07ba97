//! Both extent maps against a naive byte-per-byte model, under random operation sequences.
//!
//! The model is a vector with one slot per byte. After every operation the map, expanded byte
//! by byte, must equal the model, must stay canonical (disjoint, merged), and queries must
//! return exactly the model's answer.

use proptest::prelude::*;
use tessera_core::{Owner, RangeMap, Slice};

const SPACE: u64 = 96;

#[derive(Clone, Debug)]
enum Op {
    Insert(u64, u64, u8),
    Remove(u64, u64),
    RemoveOwned(u64, u64, u8),
    Truncate(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let range = (0..SPACE, 0..SPACE).prop_map(|(a, b)| (a.min(b), a.max(b) + 1));
    prop_oneof![
        4 => (range.clone(), 0u8..3).prop_map(|((s, e), v)| Op::Insert(s, e, v)),
        1 => range.clone().prop_map(|(s, e)| Op::Remove(s, e)),
        1 => (range, 0u8..3).prop_map(|((s, e), v)| Op::RemoveOwned(s, e, v)),
        1 => (0..SPACE).prop_map(Op::Truncate),
    ]
}

/// Expands a map into one value per byte.
fn expand<V: Slice>(m: &RangeMap<V>) -> Vec<Option<V>> {
    let mut out = vec![None; SPACE as usize + 1];
    for e in m.iter() {
        for b in e.start..e.end {
            out[b as usize] = Some(e.value.advance(b - e.start));
        }
    }
    out
}

fn check_queries<V: Slice>(
    m: &RangeMap<V>,
    model: &[Option<V>],
    lo: u64,
    hi: u64,
) -> Result<(), TestCaseError> {
    let mut got = vec![None; model.len()];
    for e in m.overlapping(lo, hi) {
        prop_assert!(e.start >= lo && e.end <= hi && e.start < e.end);
        for b in e.start..e.end {
            got[b as usize] = Some(e.value.advance(b - e.start));
        }
    }
    let want: Vec<Option<V>> = (0..model.len() as u64)
        .map(|b| {
            if b >= lo && b < hi {
                model[b as usize].clone()
            } else {
                None
            }
        })
        .collect();
    prop_assert_eq!(got, want);
    let mut gap_bytes: Vec<u64> = m.gaps(lo, hi).into_iter().flat_map(|(s, e)| s..e).collect();
    gap_bytes.sort_unstable();
    let want_gaps: Vec<u64> = (lo..hi).filter(|b| model[*b as usize].is_none()).collect();
    prop_assert_eq!(gap_bytes, want_gaps.clone());
    prop_assert_eq!(m.covers(lo, hi), want_gaps.is_empty());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Global ownership map: last attach wins, detach removes only the caller's bytes.
    #[test]
    fn ownership_map_matches_byte_model(ops in proptest::collection::vec(op(), 1..60), q in (0..SPACE, 0..SPACE)) {
        let owner = |v: u8| Owner { node: u32::from(v % 2), client: u64::from(v) };
        let mut map: RangeMap<Owner> = RangeMap::new();
        let mut model: Vec<Option<Owner>> = vec![None; SPACE as usize + 1];
        for op in &ops {
            match *op {
                Op::Insert(s, e, v) => {
                    map.insert(s, e, owner(v));
                    for b in s..e { model[b as usize] = Some(owner(v)); }
                }
                Op::Remove(s, e) => {
                    map.remove(s, e);
                    for b in s..e { model[b as usize] = None; }
                }
                Op::RemoveOwned(s, e, v) => {
                    let want: u64 = (s..e).filter(|b| model[*b as usize] == Some(owner(v))).count() as u64;
                    prop_assert_eq!(map.remove_where(s, e, |o| *o == owner(v)), want);
                    for b in s..e {
                        if model[b as usize] == Some(owner(v)) { model[b as usize] = None; }
                    }
                }
                Op::Truncate(size) => {
                    map.truncate(size);
                    for b in size..=SPACE { model[b as usize] = None; }
                }
            }
            prop_assert_eq!(map.check_invariants(), Ok(()));
            prop_assert_eq!(expand(&map), model.clone());
        }
        let (lo, hi) = (q.0.min(q.1), q.0.max(q.1) + 1);
        check_queries(&map, &model, lo, hi)?;
        // Canonical form: the map is as small as the model allows.
        let runs = model.windows(2).filter(|w| w[0] != w[1] && w[1].is_some()).count()
            + usize::from(model[0].is_some());
        prop_assert_eq!(map.len(), runs);
    }

    /// Local extent map: logical byte -> log position, newest write wins.
    #[test]
    fn local_map_matches_byte_model(ops in proptest::collection::vec(op(), 1..60), q in (0..SPACE, 0..SPACE)) {
        let mut map: RangeMap<u64> = RangeMap::new();
        let mut model: Vec<Option<u64>> = vec![None; SPACE as usize + 1];
        let mut log_end = 0u64;
        for op in &ops {
            match *op {
                // Each insert is a write appended to the log: positions are fresh.
                Op::Insert(s, e, _) => {
                    map.insert(s, e, log_end);
                    for b in s..e { model[b as usize] = Some(log_end + (b - s)); }
                    log_end += e - s;
                }
                Op::Remove(s, e) | Op::RemoveOwned(s, e, _) => {
                    map.remove(s, e);
                    for b in s..e { model[b as usize] = None; }
                }
                Op::Truncate(size) => {
                    map.truncate(size);
                    for b in size..=SPACE { model[b as usize] = None; }
                }
            }
            prop_assert_eq!(map.check_invariants(), Ok(()));
            prop_assert_eq!(expand(&map), model.clone());
        }
        let (lo, hi) = (q.0.min(q.1), q.0.max(q.1) + 1);
        check_queries(&map, &model, lo, hi)?;
    }
}
