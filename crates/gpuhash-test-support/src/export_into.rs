//! The `_into` exports (`export_into`, `export_into_on`) against the model: into buffers
//! exactly as long as the table (host slices staged and registered, device buffers),
//! longer ones (the slots past the pairs left alone), and one pair short (`InvalidInput`,
//! nothing written, the table unchanged); on an empty table, after random and adversarial
//! inserts, and after removals.

use gpuhash_core::Device;
use gpuhash_core::table::{ErrorKind, TableError};

use crate::conformance::{During, ModelOf, check_everything, fresh, run_steps};
use crate::inputs::{SeededRng, adversarial_keys};
use crate::shape::{Shape, Via};
use crate::steps::Step;

/// Random keys a table of the check holds, besides the adversarial ones.
const RANDOM_KEYS: usize = 50_000;

pub(crate) fn export_into<T: Shape<Tag>, Tag>(
    make: &impl Fn(&Device, usize) -> Result<T, T::Error>,
    via: Via<'_>,
) -> Result<(), String> {
    let random: Vec<T::Key> = SeededRng::new(0xe0).distinct_keys(RANDOM_KEYS);
    let adversarial = adversarial_keys::<T::Key>();
    let (table, mut model) = fresh(make, RANDOM_KEYS + adversarial.len())?;
    check_stage(&table, via, &model).map_err(|why| format!("empty: {why}"))?;
    let inserts = [
        Step::Insert(random.clone(), 1),
        Step::Insert(adversarial, 2),
    ];
    run_steps(&table, via, &mut model, &inserts)?;
    check_stage(&table, via, &model).map_err(|why| format!("after inserts: {why}"))?;
    let gone = random.iter().step_by(3).copied().collect();
    run_steps(&table, via, &mut model, &[Step::Remove(gone)])?;
    check_stage(&table, via, &model).map_err(|why| format!("after removals: {why}"))
}

/// Every kind of caller buffer against the model, which the table must match.
fn check_stage<T: Shape<Tag>, Tag>(
    table: &T,
    via: Via<'_>,
    model: &ModelOf<T, Tag>,
) -> Result<(), String> {
    let n = model.len();
    // A set's values take no room.
    let values_for = |room: usize| if size_of::<T::Value>() == 0 { 0 } else { room };
    for (room, registered) in [(n, false), (n, true), (n + 7, false)] {
        let got = table.export_into_via(via, (room, values_for(room)), registered);
        let written = got.written.during("export_into")?;
        if written != n {
            return Err(format!(
                "export_into into room for {room} said {written} pairs, the model holds {n}"
            ));
        }
        if !got.rest_untouched {
            return Err(format!(
                "export_into into room for {room} wrote past the pairs"
            ));
        }
        model.check_export(got.pairs)?;
    }
    if n > 0 {
        let mut short = vec![((n - 1, values_for(n)), true)];
        if values_for(n) > 0 {
            short.push(((n, n - 1), false));
        }
        for (rooms, registered) in short {
            let got = table.export_into_via(via, rooms, registered);
            match got.written {
                Err(e) if e.kind() == ErrorKind::InvalidInput => {}
                other => {
                    return Err(format!(
                        "export_into into room for {rooms:?} of {n} pairs gave {other:?}, not \
                         InvalidInput"
                    ));
                }
            }
            if !got.rest_untouched {
                return Err(format!(
                    "a refused export_into into {rooms:?} wrote the buffers"
                ));
            }
        }
    }
    check_everything(table, via, model)
}
