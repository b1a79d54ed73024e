//! The checks run by the cargo-fuzz target (`fuzz/fuzz_targets/aof.rs`) and by their stable
//! stand-in property tests. Not part of the API.

use crate::reader::{Event, FormatError, Reader};
use crate::{Ending, Entry, Manifest};

/// Everything a reader produced from a file: its entries, and its ending or error.
pub type ReadOutcome = (Vec<Entry>, Result<Ending, FormatError>);

/// Feeds `data` to a fresh reader in pieces of the given sizes (cycled; the whole file at once
/// when empty), draining events after each piece, and returns what came out.
pub fn read_in_pieces(data: &[u8], sizes: &[usize]) -> ReadOutcome {
    let mut reader = Reader::new();
    let mut entries = Vec::new();
    let mut rest = data;
    let mut i = 0;
    let drain =
        |reader: &mut Reader, entries: &mut Vec<Entry>| -> Option<Result<Ending, FormatError>> {
            loop {
                match reader.next_event() {
                    Ok(Event::Entry(e)) => entries.push(e),
                    Ok(Event::NeedData) => return None,
                    Ok(Event::End(ending)) => return Some(Ok(ending)),
                    Err(e) => return Some(Err(e)),
                }
            }
        };
    while !rest.is_empty() {
        let n = match sizes {
            [] => rest.len(),
            _ => sizes[i % sizes.len()].clamp(1, rest.len()),
        };
        i += 1;
        reader.feed(&rest[..n]);
        rest = &rest[n..];
        if let Some(Err(e)) = drain(&mut reader, &mut entries) {
            return (entries, Err(e));
        }
    }
    reader.finish();
    let end = drain(&mut reader, &mut entries).expect("a finished reader ends");
    (entries, end)
}

/// The reader never panics, gives the same result however the bytes are split, and reports
/// consistent offsets.
pub fn check_reader(data: &[u8], sizes: &[usize]) {
    let whole = read_in_pieces(data, &[]);
    let pieces = read_in_pieces(data, sizes);
    assert_eq!(whole, pieces, "pieces {sizes:?}");
    let mut at = 0u64;
    for e in &whole.0 {
        assert_eq!(e.offset, at);
        assert!(e.end > e.offset);
        at = e.end;
    }
    match whole.1 {
        Ok(Ending::Complete { len }) => assert_eq!(len, data.len() as u64),
        Ok(Ending::Empty) => assert!(data.is_empty()),
        Ok(Ending::Truncated {
            valid_up_to, len, ..
        })
        | Ok(Ending::IncompleteMulti { valid_up_to, len }) => {
            assert_eq!(len, data.len() as u64);
            assert!(valid_up_to <= len);
        }
        Err(e) => assert!(e.offset <= data.len() as u64),
    }
}

/// The manifest parser never panics, and a manifest it accepts renders to bytes that parse
/// back to it (when every rendered line still fits Redis's line limit).
pub fn check_manifest(data: &[u8]) {
    if let Ok(m) = Manifest::parse(data) {
        let rendered = m.render();
        if rendered.is_empty() {
            // Only comments: nothing to write (and an empty file is refused).
            assert_eq!(m, Manifest::new());
        } else if rendered
            .split(|&b| b == b'\n')
            .all(|line| line.len() < crate::manifest::MANIFEST_MAX_LINE)
        {
            assert_eq!(Manifest::parse(&rendered), Ok(m));
        }
    }
}

/// Both checks on one input (the fuzz target's body).
pub fn exercise(data: &[u8]) {
    check_manifest(data);
    let sizes: Vec<usize> = data
        .iter()
        .take(8)
        .map(|&b| usize::from(b % 64) + 1)
        .collect();
    check_reader(data, &sizes);
}
