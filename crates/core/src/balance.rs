//! Cutting a sequence into runs of about equal weight, in order: the messages a long
//! history is summarized in (④'s chunks, `middle::summary`). (A parallel count, whose
//! order does not matter, shares its messages out largest first: `estimate::parallel`.)

/// `items` (each with its weight, and whether a run may start at it) in at most `wanted`
/// runs, in order: a new run starts at the first item allowed to start one once the items
/// before it weigh the runs so far's share of `total`, so runs stay similar even where a
/// place to cut is missing here and there. Never an empty run but for empty `items`.
pub(crate) fn balanced_runs<T>(
    items: impl IntoIterator<Item = (T, u64, bool)>,
    total: u64,
    wanted: usize,
) -> Vec<Vec<T>> {
    let per_run = total.div_ceil(wanted.max(1) as u64);
    let mut runs: Vec<Vec<T>> = vec![Vec::new()];
    let mut running = 0u64;
    for (item, weight, may_start) in items {
        let due = per_run * runs.len() as u64;
        if may_start && running >= due && runs.len() < wanted {
            runs.push(Vec::new());
        }
        running += weight;
        if let Some(run) = runs.last_mut() {
            run.push(item);
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_similar_in_order_and_start_only_where_allowed() {
        let items = (0..12).map(|i| (i, 10, i != 4));
        let runs = balanced_runs(items, 120, 3);
        assert_eq!(
            runs,
            [vec![0, 1, 2, 3, 4], vec![5, 6, 7], vec![8, 9, 10, 11]]
        );
        assert_eq!(balanced_runs((0..3).map(|i| (i, 1, true)), 3, 5).len(), 3);
        assert_eq!(
            balanced_runs(std::iter::empty::<(u8, u64, bool)>(), 0, 2),
            [Vec::<u8>::new()]
        );
    }
}
