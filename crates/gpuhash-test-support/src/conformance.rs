//! The conformance suite: the checks every table of the contract passes, each against the
//! host model, through the host forms and again through the device forms.

use std::any::type_name;
use std::collections::HashSet;

use gpuhash_core::Device;
use gpuhash_core::staging::CHUNK;
use gpuhash_core::table::{ErrorKind, Key, Map, MultiMap, Set, Table, TableError, Value};

use crate::caller_buffers::{map_caller_buffers, multimap_caller_buffers, set_caller_buffers};
use crate::chunked::{chunked_inserts, small};
use crate::export_into::export_into;
use crate::gpu::{all_memory, device, fill_device_except, shared_memory, stream};
use crate::inputs::{SeededRng, adversarial_keys, value_of, values_of};
use crate::model::Model;
use crate::shape::{MapShape, MultiMapShape, SetShape, Shape, Via, clear_via, len_via};
use crate::steps::{Step, batch_values, find_failure, small_key};

/// Runs every check of the contract on maps that `make` builds (`make(device, capacity)`;
/// the table may grow past the capacity): random batch sequences against a `HashMap`,
/// the adversarial keys, equal keys in one batch (one of their values stays, whole),
/// mismatched lengths, exports into caller buffers (exactly full, longer, one short),
/// four host threads on one table, host lookups of many chunks (for a table whose lookups
/// run in chunks), and out of device memory in the middle of a batch; the
/// first five through the device forms on a caller's stream as well; then the `_into`
/// forms into reused and registered caller buffers ([`PageAlone`](crate::PageAlone)); then
/// host inserts cut into chunks of a few thousand keys (for a table whose inserts run in
/// chunks): keys held and new, repeated within and across chunks, from pageable and
/// registered memory, and a failing chunk (the first, the third, the last), after which
/// the table must hold exactly what it held before.
/// Takes the memory guards itself: call it holding neither. Prints nothing when the map
/// conforms; otherwise panics naming the map type, the check and the failing step.
pub fn map_conformance<M, F>(make: F)
where
    M: Map,
    F: Fn(&Device, usize) -> Result<M, M::Error>,
{
    conformance::<M, MapShape, _>(&make);
    let _memory = shared_memory();
    expect::<M>("caller buffers", Via::Host, map_caller_buffers(&make));
    if inserts_in_chunks(&make) {
        expect::<M>(
            "inserts of many chunks",
            Via::Host,
            chunked_inserts(&small(&make, 1 << 10)),
        );
    }
}

/// [`map_conformance`] for sets: an insert of a key the set holds changes nothing.
pub fn set_conformance<S, F>(make: F)
where
    S: Set,
    F: Fn(&Device, usize) -> Result<S, S::Error>,
{
    conformance::<S, SetShape, _>(&make);
    let _memory = shared_memory();
    expect::<S>("caller buffers", Via::Host, set_caller_buffers(&make));
    if inserts_in_chunks(&make) {
        expect::<S>(
            "inserts of many chunks",
            Via::Host,
            chunked_inserts(&small(&make, 1 << 10)),
        );
    }
}

/// [`map_conformance`] for multimaps: every insert adds a value, equal copies included,
/// and `count`, `get_all` and `remove_all` answer for all of a key's values.
pub fn multimap_conformance<M, F>(make: F)
where
    M: MultiMap,
    F: Fn(&Device, usize) -> Result<M, M::Error>,
{
    conformance::<M, MultiMapShape, _>(&make);
    let _memory = shared_memory();
    expect::<M>("caller buffers", Via::Host, multimap_caller_buffers(&make));
}

fn conformance<T, Tag, F>(make: F)
where
    T: Shape<Tag>,
    F: Fn(&Device, usize) -> Result<T, T::Error>,
{
    {
        let _memory = shared_memory();
        for via in [Via::Host, Via::Device(stream())] {
            expect::<T>("random batch sequences", via, random_sequences(&make, via));
            expect::<T>("adversarial keys", via, adversarial(&make, via));
            expect::<T>("equal keys in one batch", via, equal_keys(&make, via));
            expect::<T>("mismatched lengths", via, mismatched_lengths(&make, via));
            expect::<T>("export into caller buffers", via, export_into(&make, via));
        }
        expect::<T>("four host threads", Via::Host, threads(&make));
        expect::<T>("lookups of many chunks", Via::Host, many_chunks(&make));
    }
    let _memory = all_memory();
    expect::<T>("out of device memory", Via::Host, out_of_memory(&make));
}

/// Whether the tables `make` builds cut host inserts into chunks (of at most the
/// staging's [`CHUNK`]): the checks of inserts in chunks are skipped for one whose inserts
/// run whole.
fn inserts_in_chunks<T: Table>(make: &impl Fn(&Device, usize) -> Result<T, T::Error>) -> bool {
    match make(device(), 1) {
        Ok(table) => table.host_insert_chunk() <= CHUNK,
        Err(e) => panic!("{}: making the table failed: {e}", type_name::<T>()),
    }
}

/// Panics, naming the table type, the check and the forms, unless the check passed.
pub(crate) fn expect<T>(check: &str, via: Via<'_>, outcome: Result<(), String>) {
    if let Err(why) = outcome {
        panic!("{}: {check}, through {via}: {why}", type_name::<T>());
    }
}

/// Table errors as check failures, naming the call.
pub(crate) trait During<R> {
    /// The failure of `call`, with the error and its kind.
    fn during(self, call: &str) -> Result<R, String>;
}

impl<R, E: TableError> During<R> for Result<R, E> {
    fn during(self, call: &str) -> Result<R, String> {
        self.map_err(|e| format!("{call} failed: {e} ({:?})", e.kind()))
    }
}

/// The model a table of shape `T` is held against.
pub(crate) type ModelOf<T, Tag> = Model<<T as Table>::Key, <T as Shape<Tag>>::Value>;

/// Runs one step on the table and the model, checking the table's answers.
fn apply<T: Shape<Tag>, Tag>(
    table: &T,
    via: Via<'_>,
    model: &mut ModelOf<T, Tag>,
    step: &Step<T::Key>,
) -> Result<(), String> {
    match step {
        Step::Insert(keys, round) => {
            let values = batch_values(keys, *round);
            table.insert_via(via, keys, &values).during("insert")?;
            let ambiguous = model.insert(keys, &values);
            let keys: Vec<T::Key> = ambiguous.iter().map(|(key, _)| *key).collect();
            let found = table.lookup_via(via, &keys).during("lookup after insert")?;
            ambiguous
                .iter()
                .zip(found)
                .try_for_each(|(a, found)| model.settle(a, &found))
        }
        Step::Lookup(keys) => {
            model.check_lookups(keys, table.lookup_via(via, keys).during("lookup")?)
        }
        Step::Count(keys) => model.check_counts(keys, &table.count_via(via, keys).during("count")?),
        Step::Remove(keys) => {
            model.check_removals(keys, &table.remove_via(via, keys).during("remove")?)
        }
        Step::Len => model.check_len(len_via(table, via).during("len")?),
        Step::Export => model.check_export(table.export_via(via).during("export")?),
        Step::Clear => {
            clear_via(table, via).during("clear")?;
            model.clear();
            Ok(())
        }
    }
}

/// Runs the steps in order, then checks the whole table.
pub(crate) fn run_steps<T: Shape<Tag>, Tag>(
    table: &T,
    via: Via<'_>,
    model: &mut ModelOf<T, Tag>,
    steps: &[Step<T::Key>],
) -> Result<(), String> {
    for (i, step) in steps.iter().enumerate() {
        apply(table, via, model, step)
            .map_err(|why| format!("step {i}, {}: {why}", step.describe()))?;
    }
    check_everything(table, via, model)
}

/// The export, the length and every key's values against the model.
pub(crate) fn check_everything<T: Shape<Tag>, Tag>(
    table: &T,
    via: Via<'_>,
    model: &ModelOf<T, Tag>,
) -> Result<(), String> {
    let keys = model.keys();
    model
        .check_export(table.export_via(via).during("export")?)
        .and_then(|()| model.check_len(len_via(table, via).during("len")?))
        .and_then(|()| model.check_lookups(&keys, table.lookup_via(via, &keys).during("lookup")?))
        .map_err(|why| format!("the whole table: {why}"))
}

/// A new empty table and its model.
pub(crate) fn fresh<T: Shape<Tag>, Tag>(
    make: &impl Fn(&Device, usize) -> Result<T, T::Error>,
    capacity: usize,
) -> Result<(T, ModelOf<T, Tag>), String> {
    let table = make(device(), capacity).during("making the table")?;
    Ok((table, Model::new(T::RULE)))
}

/// Steps over keys of a small range (so that they repeat and collide), from quickcheck,
/// on a table made for fewer keys than they reach; [`sequence_cases`] sequences.
fn random_sequences<T: Shape<Tag>, Tag>(
    make: &impl Fn(&Device, usize) -> Result<T, T::Error>,
    via: Via<'_>,
) -> Result<(), String> {
    let chunk = make(device(), SEQUENCE_CAPACITY)
        .during("making the table")?
        .host_lookup_chunk();
    let property = |raw: &Vec<Step<u16>>| {
        let steps: Vec<Step<T::Key>> = raw.iter().map(|s| s.map_keys(small_key)).collect();
        let (table, mut model) = fresh(make, SEQUENCE_CAPACITY)?;
        run_steps(&table, via, &mut model, &steps)
    };
    match find_failure(0x5eed, sequence_cases(chunk), 120, property) {
        None => Ok(()),
        Some((raw, why)) => Err(format!(
            "{why}\n  in the sequence (raw key r stands for r % 512 - 3) {raw:?}"
        )),
    }
}

/// The capacity [`random_sequences`] makes its tables for.
const SEQUENCE_CAPACITY: usize = 64;

/// Sequences [`random_sequences`] runs on a table of host lookup chunks of `chunk` keys:
/// 40, or 16 for a table whose lookups run whole (past the staging's [`CHUNK`]). Such a
/// table pages its parts in for every batch (a swap table of eight children, two
/// resident, pages six of them in and out a step, each page-out of a changed child
/// exporting it to rebuild its miss filter), so a step costs it tens of device round
/// trips where another table takes one; 16 sequences of up to 120 steps still hold it to
/// the model over a thousand steps, through every verb.
fn sequence_cases(chunk: usize) -> usize {
    if chunk > CHUNK { 16 } else { 40 }
}

/// Every adversarial key missed, inserted, found, replaced, counted and removed.
fn adversarial<T: Shape<Tag>, Tag>(
    make: &impl Fn(&Device, usize) -> Result<T, T::Error>,
    via: Via<'_>,
) -> Result<(), String> {
    let keys = adversarial_keys::<T::Key>();
    let half = keys[..keys.len() / 2].to_vec();
    let (table, mut model) = fresh(make, keys.len())?;
    let steps = [
        Step::Lookup(keys.clone()),
        Step::Insert(keys.clone(), 1),
        Step::Lookup(keys.clone()),
        Step::Count(keys.clone()),
        Step::Export,
        Step::Insert(half.clone(), 2),
        Step::Lookup(keys.clone()),
        Step::Remove(half.clone()),
        Step::Count(keys.clone()),
        Step::Len,
        Step::Insert(half, 3),
        Step::Remove(keys.clone()),
        Step::Lookup(keys),
        Step::Len,
    ];
    run_steps(&table, via, &mut model, &steps)
}

/// Batches holding each key eight times, with different values: a map keeps one of them
/// whole, a set the key once, a multimap every copy; removals and inserts again.
fn equal_keys<T: Shape<Tag>, Tag>(
    make: &impl Fn(&Device, usize) -> Result<T, T::Error>,
    via: Via<'_>,
) -> Result<(), String> {
    let keys = adversarial_keys::<T::Key>();
    let copies: Vec<T::Key> = keys.iter().cycle().take(8 * keys.len()).copied().collect();
    let (table, mut model) = fresh(make, keys.len())?;
    let steps = [
        Step::Insert(copies.clone(), 1),
        Step::Lookup(keys.clone()),
        Step::Count(keys.clone()),
        Step::Export,
        Step::Remove(copies[..keys.len() * 3 / 2].to_vec()),
        Step::Insert(copies.clone(), 2),
        Step::Insert(copies, 3),
        Step::Lookup(keys),
    ];
    run_steps(&table, via, &mut model, &steps)
}

/// Inserts whose keys and values differ in length give `InvalidInput` and change nothing
/// (maps and multimaps; a set takes no values).
fn mismatched_lengths<T: Shape<Tag>, Tag>(
    make: &impl Fn(&Device, usize) -> Result<T, T::Error>,
    via: Via<'_>,
) -> Result<(), String> {
    if size_of::<T::Value>() == 0 {
        return Ok(());
    }
    let keys = adversarial_keys::<T::Key>();
    let (held, others) = keys.split_at(keys.len() / 2);
    let (table, mut model) = fresh(make, keys.len())?;
    run_steps(&table, via, &mut model, &[Step::Insert(held.to_vec(), 1)])?;
    for (k, v) in [(3, 2), (0, 1), (2, 3), (others.len(), others.len() - 1)] {
        let values = batch_values::<T::Key, T::Value>(&others[..k.max(v)], 2);
        match table.insert_via(via, &others[..k], &values[..v]) {
            Err(e) if e.kind() == ErrorKind::InvalidInput => {}
            other => {
                return Err(format!(
                    "an insert of {k} keys and {v} values gave {other:?}, not InvalidInput"
                ));
            }
        }
    }
    check_everything(&table, via, &model)
}

/// Host lookups of three of the table's chunks ([`Table::host_lookup_chunk`]), the last
/// short, half of the keys in the table: the chunks run in lanes on several streams, and
/// every answer must land where the whole batch would put it. Skipped for a table whose
/// lookups run whole (or in chunks past the staging's [`CHUNK`]): it has no lanes to
/// check, and would look up keys by the million for nothing (a table that pages its parts
/// in would page them all for every batch).
fn many_chunks<T: Shape<Tag>, Tag>(
    make: &impl Fn(&Device, usize) -> Result<T, T::Error>,
) -> Result<(), String> {
    let Some(count) = many_chunks_keys(
        make(device(), 1)
            .during("making the table")?
            .host_lookup_chunk(),
    ) else {
        return Ok(());
    };
    let keys: Vec<T::Key> = SeededRng::new(0xc4).distinct_keys(count);
    let held: Vec<T::Key> = keys.iter().step_by(2).copied().collect();
    let (table, mut model) = fresh(make, held.len())?;
    let steps = [
        Step::Insert(held, 1),
        Step::Lookup(keys.clone()),
        Step::Count(keys),
    ];
    run_steps(&table, Via::Host, &mut model, &steps)
}

/// Keys [`many_chunks`] looks up for a table of host lookup chunks of `chunk` keys: two
/// whole chunks and a short last one, past half a chunk; none when the chunks are past
/// [`CHUNK`].
fn many_chunks_keys(chunk: usize) -> Option<usize> {
    let chunk = chunk.max(1);
    (chunk <= CHUNK).then(|| 5 * chunk / 2 + (chunk / 4).min(12_345))
}

/// Four host threads on one table, each writing and removing keys of its own and reading
/// everyone's: each thread sees its own keys as its model says, no reader sees a value
/// nobody wrote, and the table ends holding what the threads' models hold.
fn threads<T: Shape<Tag>, Tag>(
    make: &impl Fn(&Device, usize) -> Result<T, T::Error>,
) -> Result<(), String> {
    const THREADS: usize = 4;
    let mut everyone: Vec<T::Key> = SeededRng::new(4).distinct_keys(THREADS * 20_000);
    everyone.extend(adversarial_keys::<T::Key>());
    everyone.sort_unstable();
    everyone.dedup();
    let (table, mut model) = fresh(make, everyone.len())?;
    let models = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let mine: Vec<T::Key> = everyone.iter().skip(t).step_by(THREADS).copied().collect();
                let (table, everyone) = (&table, &everyone);
                scope.spawn(move || {
                    one_thread(table, &mine, everyone).map_err(|why| format!("thread {t}: {why}"))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a test thread panicked"))
            .collect::<Result<Vec<_>, String>>()
    })?;
    for theirs in models {
        model.absorb(theirs);
    }
    check_everything(&table, Via::Host, &model)
}

/// One thread of [`threads`]: rounds of inserting its keys with their one value, reading
/// its own and everyone's keys, and removing half of its own.
fn one_thread<T: Shape<Tag>, Tag>(
    table: &T,
    mine: &[T::Key],
    everyone: &[T::Key],
) -> Result<ModelOf<T, Tag>, String> {
    let values: Vec<T::Value> = values_of(mine);
    let removed = &mine[..mine.len() / 2];
    let mut model = Model::new(T::RULE);
    for round in 0..4 {
        table
            .insert_via(Via::Host, mine, &values)
            .during("insert")?;
        model.insert(mine, &values);
        model.check_lookups(mine, table.lookup_via(Via::Host, mine).during("lookup")?)?;
        only_written_values(
            everyone,
            &table.lookup_via(Via::Host, everyone).during("lookup")?,
        )?;
        model.check_removals(
            removed,
            &table.remove_via(Via::Host, removed).during("remove")?,
        )?;
        model
            .check_lookups(mine, table.lookup_via(Via::Host, mine).during("lookup")?)
            .map_err(|why| format!("round {round}: {why}"))?;
    }
    Ok(model)
}

/// Every value found is the one value the tests store under its key.
fn only_written_values<K: Key, V: Value>(keys: &[K], found: &[Vec<V>]) -> Result<(), String> {
    for (key, values) in keys.iter().zip(found) {
        if let Some(v) = values.iter().find(|&&v| v != value_of::<V>(key.widen())) {
            return Err(format!(
                "a reader saw {v:?} under {key:?}, a value nobody wrote"
            ));
        }
    }
    Ok(())
}

/// An insert of 4M new keys with all but a little device memory taken: it succeeds or
/// fails with `OutOfDeviceMemory` or `NotInserted`; either way the pairs held before are
/// all there, each key of the batch is there with its value or not at all, and the table
/// takes inserts again once memory is back. (A table whose error names the inserts that
/// did not go in checks that they are exactly the missing ones in its own tests.)
fn out_of_memory<T: Shape<Tag>, Tag>(
    make: &impl Fn(&Device, usize) -> Result<T, T::Error>,
) -> Result<(), String> {
    const BATCH: usize = 1 << 22;
    let before = adversarial_keys::<T::Key>();
    let (table, mut model) = fresh(make, 1 << 10)?;
    run_steps(
        &table,
        Via::Host,
        &mut model,
        &[Step::Insert(before.clone(), 1)],
    )?;
    let held: HashSet<T::Key> = before.into_iter().collect();
    let mut batch: Vec<T::Key> = SeededRng::new(22).distinct_keys(BATCH + held.len());
    batch.retain(|k| !held.contains(k));
    // Room for the batch's keys and values, 4 bytes a key of scratch and 4 MiB: never
    // enough to hold the batch as well, unless the host form stages it in pieces.
    let pair_bytes = size_of::<T::Key>() + size_of::<T::Value>();
    let room = batch.len() * (pair_bytes + 4) + (4 << 20);
    let filler = fill_device_except(stream(), room);
    let outcome = table.insert_via(Via::Host, &batch, &values_of(&batch));
    drop(filler);
    let went_in = what_went_in(&table, &batch, outcome)?;
    model.insert(&went_in, &values_of(&went_in));
    check_everything(&table, Via::Host, &model)?;
    let more = SeededRng::new(23).distinct_keys(1000);
    run_steps(
        &table,
        Via::Host,
        &mut model,
        &[Step::Insert(more.clone(), 2), Step::Lookup(more)],
    )
}

/// The keys of `batch` that an insert ending as `outcome` put in, checking that it failed,
/// if it did, for want of memory, and that each key went in whole or not at all.
fn what_went_in<T: Shape<Tag>, Tag>(
    table: &T,
    batch: &[T::Key],
    outcome: Result<(), T::Error>,
) -> Result<Vec<T::Key>, String> {
    if let Err(e) = &outcome
        && !matches!(
            e.kind(),
            ErrorKind::OutOfDeviceMemory | ErrorKind::NotInserted
        )
    {
        return Err(format!(
            "the insert failed with {e} ({:?}), not OutOfDeviceMemory or NotInserted",
            e.kind()
        ));
    }
    let found = table
        .lookup_via(Via::Host, batch)
        .during("lookup of the batch")?;
    only_written_values(batch, &found)?;
    let went_in: Vec<T::Key> = batch
        .iter()
        .zip(&found)
        .filter(|(_, values)| !values.is_empty())
        .map(|(&key, _)| key)
        .collect();
    if outcome.is_ok() && went_in.len() != batch.len() {
        return Err(format!(
            "the insert succeeded, but {} of its {} keys are missing",
            batch.len() - went_in.len(),
            batch.len()
        ));
    }
    Ok(went_in)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_that_look_up_whole_run_fewer_sequences() {
        for chunk in [1, 65_536, CHUNK] {
            assert_eq!(sequence_cases(chunk), 40, "{chunk}");
        }
        assert_eq!(sequence_cases(CHUNK + 1), 16);
        assert_eq!(sequence_cases(usize::MAX), 16);
    }

    #[test]
    fn many_chunks_looks_up_two_whole_chunks_and_a_short_one() {
        assert_eq!(many_chunks_keys(CHUNK), Some(5 * CHUNK / 2 + 12_345));
        for chunk in [4, 1000, 65_536, CHUNK] {
            let keys = many_chunks_keys(chunk).unwrap();
            assert_eq!(keys / chunk, 2, "{chunk}");
            assert!(keys % chunk > chunk / 2, "{chunk}");
        }
        // Lookups run whole, or in chunks too large to look up a few of: skipped.
        assert_eq!(many_chunks_keys(CHUNK + 1), None);
        assert_eq!(many_chunks_keys(usize::MAX), None);
    }
}
