//! Names that come from files (plan tasks and actions, trace task names, scenarios, channels) are
//! shown to people in messages and tables. A name is data someone else may have written: it must not
//! move the cursor, rewrite the line, reorder text (bidi overrides) or fill the screen. One function
//! makes any name safe to show.

use std::borrow::Cow;

/// Longest name shown, in characters; longer names are cut and end in `...`.
pub const MAX_NAME_CHARS: usize = 64;

/// `name` as it may be shown: control characters (C0, DEL, C1, escape sequences' ESC included),
/// line and paragraph separators, bidi embeddings, overrides and isolates (U+202A-202E, U+2066-2069,
/// U+200E/200F, U+061C) and other invisible format characters written as `\u{XXXX}` (`\n`, `\t`,
/// `\r` as such), and the whole cut to [`MAX_NAME_CHARS`] characters plus `...`. Plain names come
/// back borrowed, unchanged.
pub fn display_name(name: &str) -> Cow<'_, str> {
    display_text(name, MAX_NAME_CHARS)
}

/// Longest path shown by [`display_path`].
pub const MAX_PATH_CHARS: usize = 512;

/// A path from a file (a journal, a plan) as it may be shown: escaped as [`display_name`] does, cut
/// at [`MAX_PATH_CHARS`] characters.
pub fn display_path(path: &std::path::Path) -> String {
    display_text(&path.to_string_lossy(), MAX_PATH_CHARS).into_owned()
}

/// [`display_name`] with another length limit (in characters, before escaping).
pub fn display_text(name: &str, max_chars: usize) -> Cow<'_, str> {
    let plain = name.chars().count() <= max_chars && !name.chars().any(needs_escape);
    if plain {
        return Cow::Borrowed(name);
    }
    let mut out = String::new();
    for (shown, c) in name.chars().enumerate() {
        if shown == max_chars {
            out.push_str("...");
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Longest message (an error, a note) shown, in characters; a longer one is cut and ends in `...`.
pub const MAX_MESSAGE_CHARS: usize = 4_000;

/// A message for the terminal that may quote values someone else wrote (a plan's program, a
/// plugin's path, a flag's value, a stored id): every character [`display_name`] would escape is
/// escaped except line feeds and tabs, which stay as they are, and the whole is cut at
/// `max_chars` characters (`usize::MAX`: not cut; tables and reports, whose cells are bounded).
/// Plain messages come back borrowed.
pub fn display_message(msg: &str, max_chars: usize) -> Cow<'_, str> {
    let keep = |c: char| c == '\n' || c == '\t';
    let plain = !msg.chars().any(|c| needs_escape(c) && !keep(c))
        && (max_chars == usize::MAX || msg.chars().count() <= max_chars);
    if plain {
        return Cow::Borrowed(msg);
    }
    let mut out = String::new();
    for (n, c) in msg.chars().enumerate() {
        if n == max_chars {
            out.push_str("...");
            break;
        }
        match c {
            c if keep(c) => out.push(c),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether `name` is a name punctual accepts from a file: 1 to [`MAX_NAME_CHARS`] characters, none
/// of which [`display_name`] would escape. `Err` says why, with the name shown escaped.
pub fn check_name(what: &str, name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("{what} name is empty; give it a name"));
    }
    if name.chars().count() > MAX_NAME_CHARS || name.chars().any(needs_escape) {
        return Err(format!(
            "{what} name '{}' must be at most {MAX_NAME_CHARS} characters, without control, invisible or text-direction characters",
            display_name(name)
        ));
    }
    Ok(())
}

/// Characters that change how the surrounding text is displayed rather than showing themselves.
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c as u32,
            0x200B..=0x200F      // zero-width spaces and joiners, LRM, RLM
            | 0x2028 | 0x2029    // line and paragraph separators
            | 0x202A..=0x202E    // bidi embeddings and overrides
            | 0x2060..=0x2069    // word joiner, invisible operators, bidi isolates
            | 0x061C             // Arabic letter mark
            | 0xFEFF             // byte order mark
            | 0xFFF9..=0xFFFB    // interlinear annotation
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plain_names_are_borrowed_unchanged() {
        assert!(matches!(
            display_name("video-1.5"),
            Cow::Borrowed("video-1.5")
        ));
        assert_eq!(display_name("größe ünd 日本"), "größe ünd 日本");
    }

    /// Issue 32, Low (raw echo): values quoted in errors and notes (a program, a path, a flag's
    /// value) reached the terminal with ESC and RLO, and at a megabyte.
    #[test]
    fn raw_echo_messages_keep_lines_escape_the_rest_and_are_bounded() {
        assert!(matches!(
            display_message("plan p.toml:3: bad\n  hint", MAX_MESSAGE_CHARS),
            Cow::Borrowed(_)
        ));
        let m = display_message(
            "exec program \x1b[2J\u{202e}x\r does not exist\nfix\tit",
            MAX_MESSAGE_CHARS,
        );
        assert_eq!(
            m,
            "exec program \\u{001b}[2J\\u{202e}x\\r does not exist\nfix\tit"
        );
        let huge = format!("value '{}'", "A".repeat(1 << 20));
        let m = display_message(&huge, MAX_MESSAGE_CHARS);
        assert_eq!(m.chars().count(), MAX_MESSAGE_CHARS + 3);
        assert_eq!(display_message(&huge, usize::MAX).len(), huge.len());
    }

    #[test]
    fn check_name_refuses_what_would_be_escaped() {
        check_name("task", "video 1").unwrap();
        let e = check_name("task", "a\u{202e}b").unwrap_err();
        assert!(e.contains("a\\u{202e}b"), "{e}");
        assert!(check_name("task", &"x".repeat(65)).is_err());
        assert!(check_name("task", "").is_err());
        let e = check_name("task", &"\x1b".repeat(100_000)).unwrap_err();
        assert!(e.len() < 1000, "the refusal itself is bounded");
    }

    #[test]
    fn names_from_files_are_escaped_and_truncated() {
        assert_eq!(display_name("a\nb"), "a\\nb");
        assert_eq!(
            display_name("\x1b[2J\x1b[31mred"),
            "\\u{001b}[2J\\u{001b}[31mred"
        );
        assert_eq!(display_name("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(display_name("x\u{2066}y\u{2069}"), "x\\u{2066}y\\u{2069}");
        assert_eq!(display_name("\u{9b}31m"), "\\u{009b}31m");
        let long = "n".repeat(1 << 20);
        let shown = display_name(&long);
        assert_eq!(shown, format!("{}...", "n".repeat(MAX_NAME_CHARS)));
        assert_eq!(
            display_name(&"n".repeat(MAX_NAME_CHARS)).len(),
            MAX_NAME_CHARS
        );
    }

    proptest! {
        #[test]
        fn nothing_that_steers_a_terminal_survives(s in "\\PC{0,8}[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}\\u{202a}-\\u{202e}\\u{2066}-\\u{2069}]\\PC{0,8}") {
            let shown = display_name(&s);
            prop_assert!(!shown.chars().any(needs_escape), "{shown:?}");
        }

        #[test]
        fn shown_names_are_bounded(s in "\\PC{0,300}") {
            prop_assert!(display_name(&s).chars().count() <= MAX_NAME_CHARS * 10 + 3);
        }
    }
}
