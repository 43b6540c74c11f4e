//! Where things are in a scene file: the span-keeping parse of the `toml` crate, so that a
//! message points at the line of the key that holds the mistake, not at its table's header,
//! and numbers an f32 cannot hold are caught before serde turns them into infinities.

use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// A table of the scene: `[simulation]`, `[output]`, or entry `index` of an array of tables
/// such as `[[materials]]`; `start` is where its header is (the fallback position).
#[derive(Clone, Copy, Debug)]
pub struct Table {
    pub name: &'static str,
    pub index: Option<usize>,
    pub start: usize,
}

/// The parsed document, or nothing when it does not parse (the typed parse reports that).
pub struct Locator<'s> {
    root: Option<Spanned<DeTable<'s>>>,
}

impl<'s> Locator<'s> {
    pub fn new(source: &'s str) -> Self {
        Locator {
            root: DeTable::parse(source).ok(),
        }
    }

    fn table(&self, t: Table) -> Option<&DeTable<'s>> {
        let value = self.root.as_ref()?.get_ref().get(t.name)?.get_ref();
        let value = match (value, t.index) {
            (DeValue::Array(items), Some(i)) => items.get(i)?.get_ref(),
            (v, None) => v,
            _ => return None,
        };
        match value {
            DeValue::Table(table) => Some(table),
            _ => None,
        }
    }

    /// Where `key` of table `t` is written; its header when the key is not in the file.
    pub fn key(&self, t: Table, key: &str) -> usize {
        self.table(t)
            .and_then(|table| table.iter().find(|(k, _)| k.get_ref() == key))
            .map_or(t.start, |(k, _)| k.span().start)
    }

    /// Where the key of table `t` that `message` talks about is (`youngs = -5 is out of
    /// range`, ``unknown model `x` ``): the first key, also of an inline table inside it
    /// (`grid = { block = 3 }`), named as `key =`, `` `key` `` or `key:`; else the header.
    pub fn mentioned(&self, t: Table, message: &str) -> usize {
        fn find(table: &DeTable<'_>, message: &str) -> Option<usize> {
            table.iter().find_map(|(k, v)| {
                let k_str: &str = k.get_ref();
                let named = [
                    format!("{k_str} ="),
                    format!("`{k_str}`"),
                    format!("{k_str}:"),
                ]
                .iter()
                .any(|p| message.contains(p.as_str()));
                match v.get_ref() {
                    _ if named => Some(k.span().start),
                    DeValue::Table(inner) => find(inner, message),
                    _ => None,
                }
            })
        }
        self.table(t)
            .and_then(|table| find(table, message))
            .unwrap_or(t.start)
    }

    /// The first number the file writes that an f32 cannot hold (beyond +-3.4e38, or `inf`
    /// or `nan`): where it is, its key and its text.
    pub fn first_non_f32(&self) -> Option<(usize, String, String)> {
        fn walk(key: &str, v: &Spanned<DeValue<'_>>) -> Option<(usize, String, String)> {
            match v.get_ref() {
                DeValue::Float(f) => {
                    let text = f.as_str();
                    let fits = text
                        .replace('_', "")
                        .parse::<f64>()
                        .is_ok_and(|x| x.is_finite() && x.abs() <= f32::MAX as f64);
                    (!fits).then(|| (v.span().start, key.to_string(), text.to_string()))
                }
                DeValue::Array(items) => items.iter().find_map(|item| walk(key, item)),
                DeValue::Table(table) => table.iter().find_map(|(k, item)| walk(k.get_ref(), item)),
                _ => None,
            }
        }
        let root = self.root.as_ref()?;
        root.get_ref()
            .iter()
            .find_map(|(k, item)| walk(k.get_ref(), item))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCENE: &str = "[simulation]\ndimension = 2\ngrid = { block = 3 }\n\n[[materials]]\nname = \"a\"\n\n[[materials]]\nname = \"b\"\nyoungs = 1e300\n";

    fn line_of(offset: usize) -> usize {
        SCENE[..offset].matches('\n').count() + 1
    }

    #[test]
    fn finds_keys_of_tables_and_entries() {
        let l = Locator::new(SCENE);
        let sim = Table {
            name: "simulation",
            index: None,
            start: 0,
        };
        assert_eq!(line_of(l.key(sim, "dimension")), 2);
        assert_eq!(l.key(sim, "absent"), 0);
        let second = Table {
            name: "materials",
            index: Some(1),
            start: 1,
        };
        assert_eq!(line_of(l.key(second, "youngs")), 10);
        assert_eq!(
            line_of(l.mentioned(second, "neo-hookean: youngs = inf is out of range")),
            10
        );
        assert_eq!(line_of(l.mentioned(sim, "block = 3: must divide")), 3);
        assert_eq!(l.mentioned(second, "nothing named here"), 1);
    }

    #[test]
    fn finds_numbers_beyond_f32() {
        let (at, key, text) = Locator::new(SCENE).first_non_f32().expect("1e300");
        assert_eq!(
            (line_of(at), key.as_str(), text.as_str()),
            (10, "youngs", "1e300")
        );
        assert!(Locator::new("a = [1.0, -3e38]\nb = 2")
            .first_non_f32()
            .is_none());
        let (_, key, text) = Locator::new("x = [0.0, -inf]")
            .first_non_f32()
            .expect("inf");
        assert_eq!((key.as_str(), text.as_str()), ("x", "-inf"));
    }
}
