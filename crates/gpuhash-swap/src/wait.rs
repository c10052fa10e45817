//! Bounded waits for device work: the pipeline polls an event until a deadline instead of
//! the driver's wait, which has no limit, so that work that never finishes comes back as
//! an error rather than a batch that never returns.

use std::time::{Duration, Instant};

use cudarc::driver::{CudaEvent, DriverError, sys};
use gpuhash_core::Error;

/// The first pause between polls; each pause doubles up to [`LONGEST_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_micros(10);
/// The longest pause between polls: how late a wait may notice that the work is done.
const LONGEST_PAUSE: Duration = Duration::from_millis(1);

/// Blocks until the work recorded before `event` has run, or fails with the driver's
/// `CUDA_ERROR_TIMEOUT` (an error of kind `Device`) at `deadline`.
pub(crate) fn event_by(event: &CudaEvent, deadline: Instant) -> Result<(), Error> {
    event.context().bind_to_thread()?;
    poll_until(
        deadline,
        || event.try_is_complete().map_err(Error::from),
        || Error::Driver(DriverError(sys::CUresult::CUDA_ERROR_TIMEOUT)),
    )
}

/// Polls `done` until it says yes, passing its errors on, with pauses growing from
/// [`FIRST_PAUSE`] to [`LONGEST_PAUSE`]; `timed_out()` once `deadline` has passed.
pub(crate) fn poll_until<E>(
    deadline: Instant,
    mut done: impl FnMut() -> Result<bool, E>,
    timed_out: impl FnOnce() -> E,
) -> Result<(), E> {
    let mut pause = FIRST_PAUSE;
    while !done()? {
        if Instant::now() >= deadline {
            return Err(timed_out());
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_that_finishes_is_waited_for() {
        let mut polls = 0;
        let outcome = poll_until(
            Instant::now() + Duration::from_secs(60),
            || {
                polls += 1;
                Ok::<_, ()>(polls == 5)
            },
            || unreachable!("the work finished"),
        );
        assert_eq!((outcome, polls), (Ok(()), 5));
    }

    #[test]
    fn work_that_never_finishes_times_out_at_the_deadline() {
        let started = Instant::now();
        let limit = Duration::from_millis(20);
        let outcome = poll_until(started + limit, || Ok::<_, &str>(false), || "timed out");
        assert_eq!(outcome, Err("timed out"));
        assert!(started.elapsed() >= limit);
        assert!(started.elapsed() < limit + Duration::from_secs(5));
    }

    #[test]
    fn an_error_while_polling_ends_the_wait() {
        let outcome = poll_until(
            Instant::now() + Duration::from_secs(60),
            || Err::<bool, _>("device lost"),
            || "timed out",
        );
        assert_eq!(outcome, Err("device lost"));
    }

    #[test]
    fn a_deadline_already_past_still_sees_finished_work() {
        let outcome = poll_until(Instant::now(), || Ok::<_, ()>(true), || ());
        assert_eq!(outcome, Ok(()));
    }
}
