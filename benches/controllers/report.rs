//! Measured values and the markdown table that compares them.

/// One measured value; `None` when the phase it belongs to timed out.
pub struct Metric {
    pub name: String,
    pub value: Option<f64>,
    pub decimals: usize,
    /// A count that a run which does not report it had zero of (e.g. requests of a verb the
    /// other implementation never used).
    pub zero_if_missing: bool,
}

/// Everything one run of one implementation measured.
pub struct RunResult {
    pub implementation: &'static str,
    pub metrics: Vec<Metric>,
    /// Anything that went wrong (timeouts, wrong object counts, ...).
    pub notes: Vec<String>,
}

impl RunResult {
    pub fn new(implementation: &'static str) -> Self {
        RunResult {
            implementation,
            metrics: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub fn push(&mut self, name: &str, value: Option<f64>, decimals: usize) {
        self.metrics.push(Metric {
            name: name.to_string(),
            value,
            decimals,
            zero_if_missing: false,
        });
    }

    /// Records a count (see [`Metric::zero_if_missing`]).
    pub fn push_count(&mut self, name: &str, count: u64) {
        self.metrics.push(Metric {
            name: name.to_string(),
            value: Some(count as f64),
            decimals: 0,
            zero_if_missing: true,
        });
    }

    /// Records a count that may be fractional (e.g. a median over several reconciles); see
    /// [`Metric::zero_if_missing`].
    pub fn push_counted(&mut self, name: &str, count: f64, decimals: usize) {
        self.metrics.push(Metric {
            name: name.to_string(),
            value: Some(count),
            decimals,
            zero_if_missing: true,
        });
    }

    pub fn note(&mut self, note: String) {
        eprintln!("bench: [{}] note: {note}", self.implementation);
        self.notes.push(note);
    }

    fn value(&self, name: &str) -> Option<Option<f64>> {
        self.metrics
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.value)
    }
}

/// The markdown table `metric | ours | Flux | ratio (Flux/ours)`. With several runs a cell shows
/// the median and, in parentheses, every run's value; the ratio compares medians.
pub fn table(results: &[RunResult]) -> String {
    // A metric only some runs have goes right after the one it follows in those runs, so that
    // rows of one kind (e.g. per resource) stay together.
    let mut names: Vec<&Metric> = Vec::new();
    for result in results {
        let mut next = 0;
        for metric in &result.metrics {
            match names.iter().position(|m| m.name == metric.name) {
                Some(at) => next = at + 1,
                None => {
                    names.insert(next, metric);
                    next += 1;
                }
            }
        }
    }
    let mut out =
        String::from("| metric | ours | Flux | ratio (Flux/ours) |\n|---|---:|---:|---:|\n");
    for metric in names {
        let (name, decimals) = (metric.name.as_str(), metric.decimals);
        let ours = values(results, "ours", metric);
        let flux = values(results, "Flux", metric);
        let ratio = match (median(&ours), median(&flux)) {
            (Some(o), Some(f)) if o > 0.0 => format!("{:.2}", f / o),
            _ => "–".to_string(),
        };
        out.push_str(&format!(
            "| {name} | {} | {} | {ratio} |\n",
            cell(&ours, decimals),
            cell(&flux, decimals)
        ));
    }
    out
}

/// What a headline figure is held to.
pub enum Goal {
    /// Nothing: shown side by side only.
    None,
    /// Ours at most this value.
    AtMost(f64),
    /// Ours at most this fraction of Flux's.
    FractionOfFlux(f64),
}

/// A metric to show in the headline table, and its goal.
pub struct Headline {
    /// The metric's exact name in the results.
    pub metric: String,
    pub goal: Goal,
}

/// The markdown table `figure | ours | Flux | ours/Flux | goal | met`, on the medians of the
/// runs (note the ratio: ours/Flux here, Flux/ours in [`table`]).
pub fn headlines(results: &[RunResult], headlines: &[Headline]) -> String {
    let mut out = String::from(
        "| figure | ours | Flux | ratio (ours/Flux) | goal | met |\n|---|---:|---:|---:|---|---|\n",
    );
    for headline in headlines {
        let Some(metric) = results
            .iter()
            .flat_map(|r| &r.metrics)
            .find(|m| m.name == headline.metric)
        else {
            continue;
        };
        let ours = median(&values(results, "ours", metric));
        let flux = median(&values(results, "Flux", metric));
        let decimals = metric.decimals.max(2);
        let show = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.decimals$}"));
        let ratio = match (ours, flux) {
            (Some(o), Some(f)) if f > 0.0 => Some(o / f),
            _ => None,
        };
        let (goal, met) = match headline.goal {
            Goal::None => ("–".to_string(), None),
            Goal::AtMost(limit) => (format!("ours <= {limit}"), ours.map(|o| o <= limit)),
            Goal::FractionOfFlux(limit) => {
                (format!("ours <= {limit} x Flux"), ratio.map(|r| r <= limit))
            }
        };
        let met = match met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "–",
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {goal} | {met} |\n",
            headline.metric,
            show(ours),
            show(flux),
            ratio.map_or("–".to_string(), |r| format!("{r:.2}")),
        ));
    }
    out
}

/// Every run's value of `metric` for one implementation (`None` = timed out).
fn values(results: &[RunResult], implementation: &str, metric: &Metric) -> Vec<Option<f64>> {
    let missing = metric.zero_if_missing.then_some(Some(0.0));
    results
        .iter()
        .filter(|r| r.implementation == implementation)
        .filter_map(|r| r.value(&metric.name).or(missing))
        .collect()
}

/// The median of the runs, or None if any run timed out or there is none.
fn median(values: &[Option<f64>]) -> Option<f64> {
    let mut known: Vec<f64> = values.iter().copied().collect::<Option<Vec<f64>>>()?;
    if known.is_empty() {
        return None;
    }
    known.sort_by(f64::total_cmp);
    let mid = known.len() / 2;
    Some(if known.len().is_multiple_of(2) {
        (known[mid - 1] + known[mid]) / 2.0
    } else {
        known[mid]
    })
}

/// "v" for one run, "median (v1 / v2 / ...)" for several, "–" for none.
fn cell(values: &[Option<f64>], decimals: usize) -> String {
    let show = |v: &Option<f64>| match v {
        Some(v) => format!("{v:.decimals$}"),
        None => "timeout".to_string(),
    };
    match values {
        [] => "–".to_string(),
        [one] => show(one),
        many => {
            let all: Vec<String> = many.iter().map(show).collect();
            let mid = median(many).map_or("–".to_string(), |m| format!("{m:.decimals$}"));
            format!("{mid} ({})", all.join(" / "))
        }
    }
}
