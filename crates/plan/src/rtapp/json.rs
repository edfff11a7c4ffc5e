//! rt-app's "json like" files as its parser (json-c) reads them: comments (`/* */`, `//`), commas
//! before a closing brace, and every value with the line and column it starts at, so a refusal can
//! point at it. Keys keep their order and their repeats (workgen's files repeat keys; rt-app itself
//! would keep only the last, so the converter refuses them by name).

/// A value and where it starts (1-based line and column).
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub value: Value,
    pub line: usize,
    pub column: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Array(Vec<Node>),
    /// Members in file order, repeats kept; each key with where it starts.
    Object(Vec<(String, Node, (usize, usize))>),
}

impl Value {
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) | Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        }
    }
}

/// A syntax error and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

struct Reader<'a> {
    text: &'a [u8],
    at: usize,
    line: usize,
    column: usize,
}

/// Read a whole file: one value, then nothing but blanks and comments.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let mut r = Reader {
        text: text.as_bytes(),
        at: 0,
        line: 1,
        column: 1,
    };
    r.blank()?;
    let v = r.value()?;
    r.blank()?;
    if r.at < r.text.len() {
        return Err(r.error("more after the end of the top-level value"));
    }
    Ok(v)
}

impl Reader<'_> {
    fn error(&self, message: impl Into<String>) -> SyntaxError {
        SyntaxError {
            line: self.line,
            column: self.column,
            message: message.into(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.at += 1;
        if c == b'\n' {
            self.line += 1;
            self.column = 1;
        } else if c & 0xC0 != 0x80 {
            // Columns count characters, not the continuation bytes of UTF-8.
            self.column += 1;
        }
        Some(c)
    }

    /// Blanks and comments.
    fn blank(&mut self) -> Result<(), SyntaxError> {
        loop {
            match (self.peek(), self.text.get(self.at + 1).copied()) {
                (Some(c), _) if c.is_ascii_whitespace() => {
                    self.bump();
                }
                (Some(b'/'), Some(b'*')) => {
                    let start = self.error("a comment that never ends (/* without */)");
                    self.bump();
                    self.bump();
                    loop {
                        match self.bump() {
                            None => return Err(start),
                            Some(b'*') if self.peek() == Some(b'/') => {
                                self.bump();
                                break;
                            }
                            _ => {}
                        }
                    }
                }
                (Some(b'/'), Some(b'/')) => {
                    while !matches!(self.peek(), None | Some(b'\n')) {
                        self.bump();
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn value(&mut self) -> Result<Node, SyntaxError> {
        let (line, column) = (self.line, self.column);
        let value = match self.peek() {
            Some(b'{') => self.object()?,
            Some(b'[') => self.array()?,
            Some(b'"') => Value::Str(self.string()?),
            Some(c) if c == b'-' || c.is_ascii_digit() => self.number()?,
            Some(c) if c.is_ascii_alphabetic() => {
                let word = self.word();
                match word.as_str() {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    "null" => Value::Null,
                    _ => {
                        return Err(SyntaxError {
                            line,
                            column,
                            message: format!("'{word}' is not a value (a quoted string?)"),
                        })
                    }
                }
            }
            Some(c) => return Err(self.error(format!("'{}' cannot start a value", c as char))),
            None => return Err(self.error("the file ends where a value should be")),
        };
        Ok(Node {
            value,
            line,
            column,
        })
    }

    fn word(&mut self) -> String {
        let mut w = String::new();
        while let Some(c) = self
            .peek()
            .filter(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            w.push(c as char);
            self.bump();
        }
        w
    }

    fn number(&mut self) -> Result<Value, SyntaxError> {
        let start = self.at;
        let err = self.error("not a number");
        while let Some(c) = self
            .peek()
            .filter(|c| c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E'))
        {
            let _ = c;
            self.bump();
        }
        let s = std::str::from_utf8(&self.text[start..self.at]).map_err(|_| err.clone())?;
        if let Ok(i) = s.parse::<i64>() {
            return Ok(Value::Int(i));
        }
        s.parse::<f64>().map(Value::Float).map_err(|_| SyntaxError {
            message: format!("'{s}' is not a number"),
            ..err
        })
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        let start = self.error("a string that never ends (missing \")");
        self.bump();
        let mut bytes = Vec::new();
        loop {
            match self.bump() {
                None | Some(b'\n') => return Err(start),
                Some(b'"') => break,
                Some(b'\\') => {
                    let c = self.bump().ok_or_else(|| start.clone())?;
                    match c {
                        b'"' | b'\\' | b'/' => bytes.push(c),
                        b'n' => bytes.push(b'\n'),
                        b't' => bytes.push(b'\t'),
                        b'r' => bytes.push(b'\r'),
                        b'b' => bytes.push(8),
                        b'f' => bytes.push(12),
                        b'u' => {
                            let mut hex = String::new();
                            for _ in 0..4 {
                                hex.push(self.bump().ok_or_else(|| start.clone())? as char);
                            }
                            let ch = u32::from_str_radix(&hex, 16)
                                .ok()
                                .and_then(char::from_u32)
                                .ok_or_else(|| self.error(format!("bad escape \\u{hex}")))?;
                            bytes.extend(ch.to_string().as_bytes());
                        }
                        other => return Err(self.error(format!("bad escape \\{}", other as char))),
                    }
                }
                Some(c) => bytes.push(c),
            }
        }
        String::from_utf8(bytes).map_err(|_| self.error("a string that is not UTF-8"))
    }

    fn array(&mut self) -> Result<Value, SyntaxError> {
        self.bump();
        let mut items = Vec::new();
        loop {
            self.blank()?;
            if self.peek() == Some(b']') {
                self.bump();
                return Ok(Value::Array(items));
            }
            items.push(self.value()?);
            self.blank()?;
            match self.peek() {
                Some(b',') => {
                    self.bump();
                }
                Some(b']') => {}
                _ => return Err(self.error("expected , or ] in an array")),
            }
        }
    }

    fn object(&mut self) -> Result<Value, SyntaxError> {
        self.bump();
        let mut members = Vec::new();
        loop {
            self.blank()?;
            if self.peek() == Some(b'}') {
                self.bump();
                return Ok(Value::Object(members));
            }
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a quoted key or }"));
            }
            let at = (self.line, self.column);
            let key = self.string()?;
            self.blank()?;
            if self.peek() != Some(b':') {
                return Err(SyntaxError {
                    line: at.0,
                    column: at.1,
                    message: format!(
                        "key \"{key}\" has no value (rt-app's workgen fills some in; \
                         write \"{key}\" : VALUE)"
                    ),
                });
            }
            self.bump();
            self.blank()?;
            let v = self.value()?;
            members.push((key, v, at));
            self.blank()?;
            match self.peek() {
                Some(b',') => {
                    self.bump();
                }
                Some(b'}') => {}
                _ => return Err(self.error("expected , or } after a member")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(n: &Node) -> &[(String, Node, (usize, usize))] {
        match &n.value {
            Value::Object(m) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn comments_trailing_commas_and_repeated_keys_are_read_with_positions() {
        let text = "{\n  /* a comment\n spanning */\n  \"a\" : 1, // line\n  \"b\" : [1, 2,],\n  \"a\" : -2.5,\n}\n";
        let n = parse(text).unwrap();
        let m = obj(&n);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].0, "a");
        assert_eq!(m[0].1.value, Value::Int(1));
        assert_eq!((m[0].1.line, m[0].1.column), (4, 9));
        assert_eq!(m[0].2, (4, 3));
        assert_eq!(m[2].1.value, Value::Float(-2.5));
        assert!(matches!(&m[1].1.value, Value::Array(v) if v.len() == 2));
    }

    #[test]
    fn a_key_without_a_value_is_named_where_it_is() {
        let e = parse("{\n\t\"x\" : {\n\t\t\"suspend\",\n\t\t\"run\" : 1 } }").unwrap_err();
        assert_eq!((e.line, e.column), (3, 3));
        assert!(
            e.message.contains("\"suspend\" has no value"),
            "{}",
            e.message
        );
    }

    #[test]
    fn syntax_errors_say_where() {
        for (text, line, what) in [
            ("{ \"a\" : tru }", 1, "not a value"),
            ("{ \"a\" : 1 \"b\" : 2 }", 1, "expected , or }"),
            ("{\n /* open", 2, "never ends"),
            ("{ \"a\" : \"x\n\" }", 1, "never ends"),
            ("{ } x", 1, "more after"),
            ("", 1, "ends where a value"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e:?}");
            assert!(e.message.contains(what), "{text:?}: {}", e.message);
        }
        assert_eq!(
            parse("\"\\u00e9\\n\"").unwrap().value,
            Value::Str("é\n".into())
        );
    }
}
