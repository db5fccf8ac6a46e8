//! The VERSION=3 dump format of LMDB's mdb_dump and BerkeleyDB's db_dump: encoding of one
//! item per line and a streaming parser for sections. Pure byte handling, no database access,
//! so that every rule here is unit tested.
//!
//! A section is:
//! ```text
//! VERSION=3
//! format=bytevalue            (or format=print)
//! database=NAME               (absent for LMDB's unnamed main database)
//! type=btree
//! db_pagesize=4096            (informational; mdb_dump also writes mapsize= and maxreaders=)
//! HEADER=END
//!  6b6579                     (key: a space, then the encoded bytes)
//!  76616c7565                 (value)
//! DATA=END
//! ```
//! See docs/design/cli.md for the quirks of mdb_dump 0.9.24 and how they are handled.

use std::io::{self, BufRead, Write};

/// How items are encoded on their line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// Two lowercase hex digits per byte.
    ByteValue,
    /// Printable ASCII (0x20..=0x7e) but backslash as is, any other byte as `\hh`.
    Print,
}

impl Encoding {
    /// The value of the `format=` header line.
    pub fn header_name(self) -> &'static str {
        match self {
            Encoding::ByteValue => "bytevalue",
            Encoding::Print => "print",
        }
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `bytes` encoded with `enc` to `out` (no leading space, no newline).
///
/// Print format writes a backslash as `\5c`. Why not `\\` (BerkeleyDB's db_dump): mdb_load
/// 0.9.24 decodes a `\\` that follows an earlier escape on the same line to a stale byte, while
/// every reader decodes `\5c` right. mdb_dump 0.9.24 writes a backslash undoubled, which no
/// reader can decode unambiguously (see docs/design/cli.md). `decode` accepts all three.
pub fn encode(enc: Encoding, bytes: &[u8], out: &mut Vec<u8>) {
    match enc {
        Encoding::ByteValue => {
            for &b in bytes {
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 15) as usize]);
            }
        }
        Encoding::Print => {
            for &b in bytes {
                if (0x20..=0x7e).contains(&b) && b != b'\\' {
                    out.push(b);
                } else {
                    out.push(b'\\');
                    out.push(HEX[(b >> 4) as usize]);
                    out.push(HEX[(b & 15) as usize]);
                }
            }
        }
    }
}

/// Writes the header of one section. `page_bytes` becomes `db_pagesize=`; `foreign` are the
/// header lines kept from the dump the table was loaded from (`mapsize=`, `maxreaders=`, ...),
/// written where mdb_dump writes its environment lines: after `type=`, before `db_pagesize=`.
pub fn write_header(
    w: &mut dyn Write,
    enc: Encoding,
    table: Option<&str>,
    page_bytes: u32,
    foreign: &[String],
) -> io::Result<()> {
    writeln!(w, "VERSION=3")?;
    writeln!(w, "format={}", enc.header_name())?;
    if let Some(name) = table {
        writeln!(w, "database={name}")?;
    }
    writeln!(w, "type=btree")?;
    for line in foreign {
        writeln!(w, "{line}")?;
    }
    writeln!(w, "db_pagesize={page_bytes}")?;
    writeln!(w, "HEADER=END")
}

/// How the header lines of a loaded dump that Larch does not interpret are kept in the table's
/// properties (`larchdb::WriteTxn::set_table_properties`): this tag line, then one line each.
pub const HEADER_PROPERTIES_TAG: &str = "larch-dump-header/1";

/// Header keys Larch writes or interprets itself; a kept line never uses one.
const OWN_KEYS: &[&str] = &[
    "VERSION",
    "format",
    "database",
    "subdatabase",
    "type",
    "db_pagesize",
    "HEADER",
    "DATA",
    "duplicates",
    "dupsort",
    "dupfixed",
    "integerkey",
    "integerdup",
    "reversekey",
    "reversedup",
];

/// Whether `line` may be kept and written back: `key=value`, printable ASCII, a key Larch
/// does not write itself. Why so strict: the lines come back out of the database, and a line
/// that could break the header (a newline, `HEADER=END`) must never be replayed.
pub fn keepable_header_line(line: &str) -> bool {
    let Some((key, _)) = line.split_once('=') else {
        return false;
    };
    !key.is_empty() && line.bytes().all(|b| (0x20..=0x7e).contains(&b)) && !OWN_KEYS.contains(&key)
}

/// The table properties that keep `lines`, or None if they do not fit.
pub fn header_properties(lines: &[String]) -> Option<Vec<u8>> {
    if lines.is_empty() {
        return Some(Vec::new());
    }
    let mut out = format!("{HEADER_PROPERTIES_TAG}\n").into_bytes();
    for line in lines {
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    (out.len() <= larchdb::limits::TABLE_PROPERTIES_BYTES_MAX).then_some(out)
}

/// The header lines kept in table properties; none if the properties are not ours. Lines that
/// are not keepable (a damaged or foreign value) are dropped.
pub fn header_lines_from_properties(props: &[u8]) -> Vec<String> {
    let Ok(text) = std::str::from_utf8(props) else {
        return Vec::new();
    };
    let mut lines = text.lines();
    if lines.next() != Some(HEADER_PROPERTIES_TAG) {
        return Vec::new();
    }
    lines
        .filter(|l| keepable_header_line(l))
        .map(str::to_string)
        .collect()
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Decodes one item (the line without its leading space and newline) into `out`.
/// Errors are messages without the line number; the caller adds it.
pub fn decode(enc: Encoding, text: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    out.clear();
    match enc {
        Encoding::ByteValue => {
            if !text.len().is_multiple_of(2) {
                return Err("odd number of hex digits".into());
            }
            for pair in text.chunks_exact(2) {
                match (hex_value(pair[0]), hex_value(pair[1])) {
                    (Some(h), Some(l)) => out.push(h << 4 | l),
                    _ => {
                        return Err(format!(
                            "not a hex digit pair: {:?}",
                            String::from_utf8_lossy(pair)
                        ))
                    }
                }
            }
        }
        Encoding::Print => {
            let mut i = 0;
            while i < text.len() {
                let c = text[i];
                if c != b'\\' {
                    out.push(c);
                    i += 1;
                    continue;
                }
                if text.get(i + 1) == Some(&b'\\') {
                    out.push(b'\\');
                    i += 2;
                    continue;
                }
                match (
                    text.get(i + 1).copied().and_then(hex_value),
                    text.get(i + 2).copied().and_then(hex_value),
                ) {
                    (Some(h), Some(l)) => {
                        out.push(h << 4 | l);
                        i += 3;
                    }
                    _ => {
                        return Err(format!(
                            "backslash at column {} is neither \\\\ nor \\ and two hex digits \
                             (mdb_dump 0.9.24 writes backslashes undoubled in print format; \
                             dump with the bytevalue format instead)",
                            i + 2
                        ))
                    }
                }
            }
        }
    }
    Ok(())
}

/// Header of one section, as parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Item encoding.
    pub encoding: Encoding,
    /// `database=`, if present.
    pub database: Option<String>,
    /// `db_pagesize=`, if present and a number.
    pub page_bytes: Option<u32>,
    /// Unrecognised `key=value` lines (mdb_load warns about them too): kept in `foreign`, but
    /// reported.
    pub ignored: Vec<(u64, String)>,
    /// Lines Larch does not interpret (`mapsize=`, `maxreaders=`, `mapaddr=`, unrecognised
    /// ones), in input order: kept with the table and written back by `larch dump`, so that
    /// a dump reloaded and dumped again is unchanged.
    pub foreign: Vec<String>,
}

/// A malformed input: the 1-based line number and what was wrong.
#[derive(Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number; the line after the last one for an early end of input.
    pub line: u64,
    /// What was wrong.
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Reads lines, counting them. A line is returned without its `\n`.
pub struct LineReader<R> {
    inner: R,
    line: u64,
    buf: Vec<u8>,
}

/// Longest line accepted: a 1 GiB value in bytevalue format, plus slack. Why: a limit on
/// everything; a runaway input fails with a message instead of exhausting memory silently.
pub const LINE_BYTES_MAX: usize = (2 << 30) + 16;

impl<R: BufRead> LineReader<R> {
    /// Wraps a reader.
    pub fn new(inner: R) -> Self {
        LineReader {
            inner,
            line: 0,
            buf: Vec::new(),
        }
    }

    /// Number of the line last returned (0 before the first).
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The next line, or None at the end of input.
    pub fn next_line(&mut self) -> Result<Option<&[u8]>, ParseError> {
        self.buf.clear();
        let n = <&mut R as io::Read>::take(&mut self.inner, LINE_BYTES_MAX as u64)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| ParseError {
                line: self.line + 1,
                message: format!("read error: {e}"),
            })?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        } else if self.buf.len() >= LINE_BYTES_MAX {
            return Err(ParseError {
                line: self.line,
                message: format!("line longer than {LINE_BYTES_MAX} bytes"),
            });
        }
        Ok(Some(&self.buf))
    }

    fn err(&self, message: impl Into<String>) -> ParseError {
        ParseError {
            line: self.line,
            message: message.into(),
        }
    }

    /// Reads a section header. Returns None at a clean end of input (no more sections).
    pub fn read_header(&mut self) -> Result<Option<Header>, ParseError> {
        let first = match self.next_line()? {
            None => return Ok(None),
            Some(l) => l.to_vec(),
        };
        match first.strip_prefix(b"VERSION=") {
            Some(b"3") => {}
            Some(v) => {
                return Err(self.err(format!(
                    "unsupported dump version {:?} (only VERSION=3 is read)",
                    String::from_utf8_lossy(v)
                )))
            }
            None => return Err(self.err("expected VERSION=3 at the start of a section")),
        }
        let mut header = Header {
            encoding: Encoding::ByteValue,
            database: None,
            page_bytes: None,
            ignored: Vec::new(),
            foreign: Vec::new(),
        };
        loop {
            let line = match self.next_line()? {
                None => {
                    let mut e = self.err("end of input inside a header (no HEADER=END)");
                    e.line += 1;
                    return Err(e);
                }
                Some(l) => l.to_vec(),
            };
            if line == b"HEADER=END" {
                return Ok(Some(header));
            }
            let Some(eq) = line.iter().position(|&c| c == b'=') else {
                return Err(self.err("expected a key=value header line"));
            };
            let (key, value) = (&line[..eq], &line[eq + 1..]);
            match key {
                b"format" => {
                    header.encoding = match value {
                        b"bytevalue" => Encoding::ByteValue,
                        b"print" => Encoding::Print,
                        _ => {
                            return Err(self.err(format!(
                                "unknown format {:?}",
                                String::from_utf8_lossy(value)
                            )))
                        }
                    }
                }
                b"database" | b"subdatabase" => {
                    let name = String::from_utf8(value.to_vec())
                        .map_err(|_| self.err("database name is not UTF-8"))?;
                    header.database = Some(name);
                }
                b"type" => {
                    if value != b"btree" {
                        return Err(self.err(format!(
                            "unsupported type {:?} (only btree)",
                            String::from_utf8_lossy(value)
                        )));
                    }
                }
                b"db_pagesize" => {
                    header.page_bytes = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok())
                }
                b"mapsize" | b"maxreaders" | b"mapaddr" => header
                    .foreign
                    .push(String::from_utf8_lossy(&line).into_owned()),
                b"duplicates" | b"dupsort" | b"dupfixed" | b"integerkey" | b"integerdup"
                | b"reversekey" | b"reversedup" => {
                    if value != b"0" {
                        return Err(self.err(format!(
                            "{}={} is not supported: Larch tables have unique byte-ordered keys",
                            String::from_utf8_lossy(key),
                            String::from_utf8_lossy(value)
                        )));
                    }
                }
                _ => {
                    let text = String::from_utf8_lossy(&line).into_owned();
                    header.ignored.push((self.line, text.clone()));
                    header.foreign.push(text);
                }
            }
        }
    }

    /// Reads the next data item of a section in dump format into `out`. Returns false at
    /// `DATA=END`.
    pub fn read_item(&mut self, enc: Encoding, out: &mut Vec<u8>) -> Result<bool, ParseError> {
        let line = self.line;
        let Some(text) = self.next_line()? else {
            return Err(ParseError {
                line: line + 1,
                message: "end of input inside a section (no DATA=END)".into(),
            });
        };
        if text == b"DATA=END" {
            return Ok(false);
        }
        let Some(body) = text.strip_prefix(b" ") else {
            return Err(self.err("expected a space-prefixed data line or DATA=END"));
        };
        let r = decode(enc, body, out);
        r.map_err(|m| self.err(m))?;
        Ok(true)
    }

    /// Reads the next item of plaintext (`-T`) input: a print-encoded line with no leading
    /// space. Returns false at the end of input.
    pub fn read_plain_item(&mut self, out: &mut Vec<u8>) -> Result<bool, ParseError> {
        let Some(text) = self.next_line()? else {
            return Ok(false);
        };
        let r = decode(Encoding::Print, text, out);
        r.map_err(|m| self.err(m))?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(e: Encoding, b: &[u8]) -> String {
        let mut v = Vec::new();
        encode(e, b, &mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn encodes_like_mdb_dump_except_backslash() {
        assert_eq!(enc(Encoding::ByteValue, b"\x00\xffA"), "00ff41");
        assert_eq!(enc(Encoding::Print, b"\x00\xff A~\x7f"), "\\00\\ff A~\\7f");
        assert_eq!(enc(Encoding::Print, b"a\\b"), "a\\5cb");
        assert_eq!(enc(Encoding::Print, b""), "");
    }

    #[test]
    fn decode_round_trips_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        for e in [Encoding::ByteValue, Encoding::Print] {
            let mut text = Vec::new();
            encode(e, &all, &mut text);
            let mut back = Vec::new();
            decode(e, &text, &mut back).unwrap();
            assert_eq!(back, all);
        }
    }

    #[test]
    fn decode_rejects_malformed_items() {
        let mut out = Vec::new();
        assert!(decode(Encoding::ByteValue, b"abc", &mut out).is_err());
        assert!(decode(Encoding::ByteValue, b"zz", &mut out).is_err());
        assert!(decode(Encoding::Print, b"a\\", &mut out).is_err());
        assert!(decode(Encoding::Print, b"\\4g", &mut out).is_err());
        decode(Encoding::ByteValue, b"AbCd", &mut out).unwrap();
        assert_eq!(out, b"\xab\xcd");
    }

    #[test]
    fn kept_header_lines_round_trip_through_properties_and_are_checked() {
        let lines = vec!["mapsize=1048576".to_string(), "maxreaders=126".to_string()];
        let props = header_properties(&lines).unwrap();
        assert_eq!(header_lines_from_properties(&props), lines);
        assert_eq!(header_properties(&[]).unwrap(), b"");
        assert!(header_lines_from_properties(b"").is_empty());
        assert!(header_lines_from_properties(b"someone else's\nmapsize=1\n").is_empty());
        // Lines that could break a header are never replayed.
        let bad = b"larch-dump-header/1\nHEADER=END\nDATA=END\nno equals\nformat=print\n=x\nk=\x01\nok=1\n";
        assert_eq!(header_lines_from_properties(bad), vec!["ok=1".to_string()]);
        assert!(header_properties(&["k=".to_string() + &"v".repeat(600)]).is_none());
    }

    #[test]
    fn parses_sections_and_names_bad_lines() {
        let input = b"VERSION=3\nformat=print\ndatabase=t\ntype=btree\nmapsize=1\nfoo=bar\n\
HEADER=END\n a\n b\nDATA=END\n";
        let mut r = LineReader::new(&input[..]);
        let h = r.read_header().unwrap().unwrap();
        assert_eq!(h.encoding, Encoding::Print);
        assert_eq!(h.database.as_deref(), Some("t"));
        assert_eq!(h.ignored, vec![(6, "foo=bar".to_string())]);
        assert_eq!(
            h.foreign,
            vec!["mapsize=1".to_string(), "foo=bar".to_string()]
        );
        let mut item = Vec::new();
        assert!(r.read_item(h.encoding, &mut item).unwrap());
        assert_eq!(item, b"a");
        assert!(r.read_item(h.encoding, &mut item).unwrap());
        assert!(!r.read_item(h.encoding, &mut item).unwrap());
        assert_eq!(r.read_header().unwrap(), None);

        let bad = b"VERSION=3\nHEADER=END\n 00\nxx\n";
        let mut r = LineReader::new(&bad[..]);
        let h = r.read_header().unwrap().unwrap();
        r.read_item(h.encoding, &mut item).unwrap();
        assert_eq!(r.read_item(h.encoding, &mut item).unwrap_err().line, 4);

        let truncated = b"VERSION=3\nHEADER=END\n 00\n";
        let mut r = LineReader::new(&truncated[..]);
        let h = r.read_header().unwrap().unwrap();
        r.read_item(h.encoding, &mut item).unwrap();
        assert_eq!(r.read_item(h.encoding, &mut item).unwrap_err().line, 4);

        let dup = b"VERSION=3\nduplicates=1\nHEADER=END\n";
        assert_eq!(LineReader::new(&dup[..]).read_header().unwrap_err().line, 2);
    }
}
