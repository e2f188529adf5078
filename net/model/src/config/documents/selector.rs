// SPDX-License-Identifier: Apache-2.0
//! The link selector expressions of `LinkAliasConfig` (`selector.match`): Talos evaluates
//! them as CEL over the link's status. keelson takes the part of CEL such selectors use:
//! `link.<field>`, string, integer and boolean literals, `==`, `!=`, `&&`, `||`, `!`,
//! parentheses, `mac(x)`, `glob(pattern, x)`, and the methods `x.startsWith(s)`,
//! `x.endsWith(s)` and `x.contains(s)`. Anything else is refused when the configuration is
//! checked, with its column, never at run time.

use crate::resource::LinkStatus;

/// The longest expression taken, and the deepest nesting.
const MAX_LEN: usize = 1024;
const MAX_DEPTH: usize = 32;

/// The link fields an expression may read (Talos's `LinkStatusSpec` field names).
const FIELDS: &[&str] = &[
    "hardware_addr",
    "permanent_addr",
    "driver",
    "bus_path",
    "kind",
    "alias",
    "alt_names",
    "mtu",
    "type",
    "physical",
];

/// A parsed selector.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Selector(Expr);

#[derive(Clone, PartialEq, Eq, Debug)]
enum Expr {
    Str(String),
    Int(i64),
    Bool(bool),
    Field(&'static str),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Eq(Box<Expr>, Box<Expr>, bool),
    Call(Func, Vec<Expr>),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Func {
    Mac,
    Glob,
    StartsWith,
    EndsWith,
    Contains,
}

#[derive(Clone, PartialEq, Debug)]
enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
    List(Vec<String>),
}

/// A selector that does not parse, at a 1-based column.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SelectorError {
    /// Where, from 1.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for SelectorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

impl Selector {
    /// Parse `text`.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        if text.len() > MAX_LEN {
            return Err(SelectorError {
                column: 1,
                message: format!("longer than {MAX_LEN} bytes"),
            });
        }
        let mut p = Parser { s: text.as_bytes(), pos: 0, depth: 0 };
        let expr = p.or()?;
        p.skip_ws();
        if p.pos < p.s.len() {
            return Err(p.error("unexpected text"));
        }
        Ok(Self(expr))
    }

    /// Does `link` match? An expression whose value is not a boolean matches nothing.
    pub fn matches(&self, link: &LinkStatus) -> bool {
        eval(&self.0, link) == Some(Value::Bool(true))
    }
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, message: &str) -> SelectorError {
        SelectorError { column: self.pos + 1, message: message.to_owned() }
    }

    fn skip_ws(&mut self) {
        while self.s.get(self.pos).is_some_and(u8::is_ascii_whitespace) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_ws();
        if self.s.get(self.pos..).is_some_and(|rest| rest.starts_with(token.as_bytes())) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }

    fn nest(&mut self) -> Result<(), SelectorError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, SelectorError> {
        self.nest()?;
        let mut left = self.and()?;
        while self.eat("||") {
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        self.depth -= 1;
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, SelectorError> {
        let mut left = self.unary()?;
        while self.eat("&&") {
            left = Expr::And(Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, SelectorError> {
        self.skip_ws();
        if self.s.get(self.pos) == Some(&b'!') && self.s.get(self.pos + 1) != Some(&b'=') {
            self.pos += 1;
            self.nest()?;
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        let left = self.postfix()?;
        if self.eat("==") {
            return Ok(Expr::Eq(Box::new(left), Box::new(self.postfix()?), true));
        }
        if self.eat("!=") {
            return Ok(Expr::Eq(Box::new(left), Box::new(self.postfix()?), false));
        }
        Ok(left)
    }

    fn postfix(&mut self) -> Result<Expr, SelectorError> {
        let mut expr = self.primary()?;
        loop {
            self.skip_ws();
            if self.s.get(self.pos) != Some(&b'.') {
                return Ok(expr);
            }
            self.pos += 1;
            let at = self.pos;
            let name = self.ident();
            let func = match name.as_str() {
                "startsWith" => Func::StartsWith,
                "endsWith" => Func::EndsWith,
                "contains" => Func::Contains,
                _ => {
                    return Err(SelectorError {
                        column: at + 1,
                        message: format!("unknown method {:?}", crate::names::escape(&name, 24)),
                    })
                }
            };
            let mut args = vec![expr];
            args.extend(self.args(1)?);
            expr = Expr::Call(func, args);
        }
    }

    fn ident(&mut self) -> String {
        self.skip_ws();
        let start = self.pos;
        while self.s.get(self.pos).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_') {
            self.pos += 1;
        }
        String::from_utf8_lossy(self.s.get(start..self.pos).unwrap_or_default()).into_owned()
    }

    fn args(&mut self, count: usize) -> Result<Vec<Expr>, SelectorError> {
        if !self.eat("(") {
            return Err(self.error("expected ("));
        }
        let mut args = Vec::new();
        for i in 0..count {
            if i > 0 && !self.eat(",") {
                return Err(self.error("expected ,"));
            }
            args.push(self.or()?);
        }
        if !self.eat(")") {
            return Err(self.error("expected )"));
        }
        Ok(args)
    }

    fn primary(&mut self) -> Result<Expr, SelectorError> {
        self.skip_ws();
        let at = self.pos;
        match self.s.get(self.pos) {
            None => Err(self.error("unexpected end")),
            Some(b'(') => {
                self.pos += 1;
                let inner = self.or()?;
                if !self.eat(")") {
                    return Err(self.error("expected )"));
                }
                Ok(inner)
            }
            Some(&q) if q == b'"' || q == b'\'' => self.string(q),
            Some(b) if b.is_ascii_digit() => {
                let text = self.ident();
                text.parse()
                    .map(Expr::Int)
                    .map_err(|_| SelectorError { column: at + 1, message: "invalid number".into() })
            }
            Some(_) => {
                let name = self.ident();
                match name.as_str() {
                    "" => Err(self.error("unexpected character")),
                    "true" => Ok(Expr::Bool(true)),
                    "false" => Ok(Expr::Bool(false)),
                    "link" => {
                        if !self.eat(".") {
                            return Err(self.error("expected . after link"));
                        }
                        let field_at = self.pos;
                        let field = self.ident();
                        match FIELDS.iter().find(|f| **f == field) {
                            Some(f) => Ok(Expr::Field(f)),
                            None => Err(SelectorError {
                                column: field_at + 1,
                                message: format!(
                                    "unknown link field {:?}",
                                    crate::names::escape(&field, 24)
                                ),
                            }),
                        }
                    }
                    "mac" => Ok(Expr::Call(Func::Mac, self.args(1)?)),
                    "glob" => Ok(Expr::Call(Func::Glob, self.args(2)?)),
                    other => Err(SelectorError {
                        column: at + 1,
                        message: format!("unknown name {:?}", crate::names::escape(other, 24)),
                    }),
                }
            }
        }
    }

    fn string(&mut self, quote: u8) -> Result<Expr, SelectorError> {
        let start = self.pos;
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            match self.s.get(self.pos) {
                None => {
                    return Err(SelectorError {
                        column: start + 1,
                        message: "unterminated string".into(),
                    })
                }
                Some(&b) if b == quote => {
                    self.pos += 1;
                    break;
                }
                Some(b'\\') => {
                    match self.s.get(self.pos + 1) {
                        Some(&c @ (b'\\' | b'"' | b'\'')) => out.push(c),
                        _ => return Err(self.error("unsupported escape")),
                    }
                    self.pos += 2;
                }
                Some(&b) => {
                    out.push(b);
                    self.pos += 1;
                }
            }
        }
        String::from_utf8(out)
            .map(Expr::Str)
            .map_err(|_| SelectorError { column: start + 1, message: "not UTF-8".into() })
    }
}

fn field(name: &str, link: &LinkStatus) -> Value {
    let mac = |m: Option<String>| Value::Str(m.unwrap_or_default());
    match name {
        "hardware_addr" => mac(Some(link.hardware_addr.to_string())),
        "permanent_addr" => mac(link.permanent_addr.as_ref().map(ToString::to_string)),
        "driver" => Value::Str(link.driver.clone()),
        "bus_path" => Value::Str(link.bus_path.clone()),
        "kind" => Value::Str(link.kind.clone()),
        "alias" => Value::Str(link.alias.clone()),
        "alt_names" => Value::List(link.alt_names.clone()),
        "mtu" => Value::Int(i64::from(link.mtu)),
        "type" => Value::Int(i64::from(link.link_type.0)),
        "physical" => Value::Bool(link.physical()),
        _ => Value::Bool(false),
    }
}

fn eval(expr: &Expr, link: &LinkStatus) -> Option<Value> {
    let text = |e: &Expr| match eval(e, link)? {
        Value::Str(s) => Some(s),
        _ => None,
    };
    let truth = |e: &Expr| match eval(e, link)? {
        Value::Bool(b) => Some(b),
        _ => None,
    };
    Some(match expr {
        Expr::Str(s) => Value::Str(s.clone()),
        Expr::Int(i) => Value::Int(*i),
        Expr::Bool(b) => Value::Bool(*b),
        Expr::Field(name) => field(name, link),
        Expr::Not(e) => Value::Bool(!truth(e)?),
        Expr::And(a, b) => Value::Bool(truth(a)? && truth(b)?),
        Expr::Or(a, b) => Value::Bool(truth(a).unwrap_or(false) || truth(b)?),
        Expr::Eq(a, b, equal) => Value::Bool((eval(a, link)? == eval(b, link)?) == *equal),
        Expr::Call(func, args) => {
            let arg = |i: usize| args.get(i).and_then(text);
            match func {
                Func::Mac => Value::Str(arg(0)?.to_ascii_lowercase()),
                Func::Glob => Value::Bool(super::super::select::glob(&arg(0)?, &arg(1)?)),
                Func::StartsWith => Value::Bool(arg(0)?.starts_with(&arg(1)?)),
                Func::EndsWith => Value::Bool(arg(0)?.ends_with(&arg(1)?)),
                Func::Contains => match eval(args.first()?, link)? {
                    Value::List(items) => Value::Bool(items.contains(&arg(1)?)),
                    Value::Str(s) => Value::Bool(s.contains(&arg(1)?)),
                    _ => return None,
                },
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{HardwareAddr, LinkType};

    fn link() -> LinkStatus {
        LinkStatus {
            link_type: LinkType::ETHER,
            hardware_addr: "00:1a:2b:3c:4d:5e".parse::<HardwareAddr>().unwrap(),
            permanent_addr: Some("00:1A:2B:3C:4D:5F".parse::<HardwareAddr>().unwrap()),
            driver: "e1000e".into(),
            bus_path: "0000:00:1f.6".into(),
            alt_names: vec!["enp0s31f6".into()],
            mtu: 1500,
            ..Default::default()
        }
    }

    fn m(text: &str) -> bool {
        Selector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}")).matches(&link())
    }

    #[test]
    fn talos_example_selectors() {
        assert!(m(r#"mac(link.permanent_addr) == "00:1a:2b:3c:4d:5f""#));
        assert!(!m(r#"mac(link.permanent_addr) == "00:1a:2b:3c:4d:5e""#));
        assert!(m(r#"glob("00:1a:2b:*", mac(link.hardware_addr))"#));
        assert!(m(r#"link.driver == "e1000e" && link.physical"#));
        assert!(m(r#"link.driver == "virtio_net" || link.bus_path.startsWith("0000:00:1f")"#));
        assert!(m(r#"!(link.driver == "virtio_net") && link.mtu == 1500"#));
        assert!(m(r#"link.alt_names.contains("enp0s31f6")"#));
        assert!(!m(r#"link.driver != "e1000e""#));
    }

    #[test]
    fn a_value_that_is_not_a_boolean_matches_nothing() {
        assert!(!m(r#"link.driver"#));
        assert!(!m(r#"link.mtu == "1500" || link.driver"#));
    }

    #[test]
    fn errors_name_their_column() {
        let e = |t: &str| Selector::parse(t).unwrap_err();
        assert_eq!(e("link.nope == 1").column, 6);
        assert_eq!(e(r#"link.driver == "x"#).column, 16);
        assert!(e("exec(\"x\")").message.contains("unknown name"));
        assert!(e("link.driver.lower()").message.contains("unknown method"));
        assert!(e("link.driver == 'a' extra").message.contains("unexpected text"));
        assert!(e(&"(".repeat(100)).message.contains("nested too deeply"));
        assert!(e(&"a".repeat(2000)).message.contains("longer than"));
    }
}
