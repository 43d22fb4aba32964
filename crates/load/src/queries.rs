//! The queries a run sends: a file in dnsperf's format or a synthetic name set.

use dnscost_wire::{synthetic_name, type_from_str, QueryOptions, QueryTemplate, WireError};

/// A query file line that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {error}")]
pub struct QuerySpecError {
    pub line: usize,
    pub error: WireError,
}

/// Every query of a run, encoded once.
#[derive(Debug, Clone)]
pub struct QuerySet {
    templates: Vec<QueryTemplate>,
}

impl QuerySet {
    /// `count` names of equal length under `tld`, all of type `qtype`.
    pub fn synthetic(count: u64, tld: &str, qtype: u16, opts: &QueryOptions) -> Result<Self, WireError> {
        let templates = (0..count)
            .map(|i| QueryTemplate::new(&synthetic_name(i, count, tld), qtype, opts))
            .collect::<Result<_, _>>()?;
        Ok(QuerySet { templates })
    }

    /// dnsperf's format: `name [type]` per line (type A when absent); blank lines and lines
    /// starting with `#` or `;` are skipped.
    pub fn parse(text: &str, opts: &QueryOptions) -> Result<Self, QuerySpecError> {
        let mut templates = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            let mut fields = line.split_whitespace();
            let name = fields.next().unwrap_or_default();
            let err = |error| QuerySpecError { line: i + 1, error };
            let qtype = fields.next().map_or(Ok(1), type_from_str).map_err(err)?;
            templates.push(QueryTemplate::new(name, qtype, opts).map_err(err)?);
        }
        Ok(QuerySet { templates })
    }

    pub fn len(&self) -> usize {
        self.templates.len()
    }

    pub fn is_empty(&self) -> bool {
        self.templates.is_empty()
    }

    /// The `i`-th query, wrapping around.
    #[inline]
    pub fn get(&self, i: u64) -> &QueryTemplate {
        &self.templates[(i % self.templates.len() as u64) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dnsperf_format() {
        let q = QuerySet::parse("# c\nexample.test A\n\n; c\nb.test AAAA\nc.test\n", &QueryOptions::default()).unwrap();
        assert_eq!(q.len(), 3);
        assert_eq!(q.get(1).question(), QueryTemplate::new("b.test", 28, &QueryOptions::default()).unwrap().question());
        assert_eq!(q.get(3).question(), q.get(0).question());
    }

    #[test]
    fn bad_lines_say_where() {
        let e = QuerySet::parse("a.test A\nb.test BOGUS\n", &QueryOptions::default()).unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(e.to_string(), "line 2: unknown record type \"BOGUS\"");
    }

    #[test]
    fn synthetic_set_has_equal_lengths() {
        let q = QuerySet::synthetic(1000, "test", 1, &QueryOptions::default()).unwrap();
        assert_eq!(q.len(), 1000);
        assert!((0..1000).all(|i| q.get(i).len() == q.get(0).len()));
    }
}
