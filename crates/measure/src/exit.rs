//! How a command ended, mapped to SPEC section 2's exit codes in one place.

use punctual_result::{Class, Failure};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Done.
    Ok,
    /// Done, but a limit the user set was exceeded (`--fail-above`, a verdict).
    LimitExceeded,
    /// Bad input or usage: nothing ran, nothing was written.
    Usage,
    /// The system refused (privilege, missing kernel feature), or the watchdog stopped the run.
    System,
    /// Interrupted: partial results written, the system restored.
    Interrupted,
    /// The exit status of a command punctual ran for the user (`shield -- COMMAND`).
    Child(u8),
}

impl Exit {
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::LimitExceeded => 1,
            Exit::Usage => 2,
            Exit::System => 3,
            // The same number the second Ctrl-C's hard exit uses (`punctual_rt::signals`).
            Exit::Interrupted => punctual_rt::signals::EXIT_INTERRUPTED as u8,
            Exit::Child(c) => c,
        }
    }

    /// The exit for a failure's class.
    pub fn of(f: &Failure) -> Exit {
        match f.class {
            Class::Usage => Exit::Usage,
            Class::System => Exit::System,
            Class::Interrupted => Exit::Interrupted,
        }
    }

    /// The exit for an error and its sources: the first [`Failure`]'s class, or a refusal of the
    /// real-time request (usage when the request itself is invalid); anything else the system's.
    pub fn of_error(e: &(dyn std::error::Error + 'static)) -> Exit {
        let mut cause = Some(e);
        while let Some(c) = cause {
            if let Some(f) = c.downcast_ref::<Failure>() {
                return Exit::of(f);
            }
            if let Some(r) = c.downcast_ref::<punctual_rt::RtError>() {
                return match r {
                    punctual_rt::RtError::Invalid(_) => Exit::Usage,
                    _ => Exit::System,
                };
            }
            cause = c.source();
        }
        Exit::System
    }

    /// `LimitExceeded` when `over`, else `Ok`: for commands whose verdict is their answer.
    pub fn limit_if(over: bool) -> Exit {
        if over {
            Exit::LimitExceeded
        } else {
            Exit::Ok
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_specs() {
        let all = [
            (Exit::Ok, 0),
            (Exit::LimitExceeded, 1),
            (Exit::Usage, 2),
            (Exit::System, 3),
            (Exit::Interrupted, 130),
        ];
        for (e, c) in all {
            assert_eq!(e.code(), c, "{e:?}");
        }
        assert_eq!(Exit::of(&Failure::usage("x")), Exit::Usage);
        assert_eq!(Exit::of(&Failure::system("x")), Exit::System);
        assert_eq!(Exit::of(&Failure::interrupted()), Exit::Interrupted);
    }

    /// An error wrapping another (as context does) takes the first classified cause's exit.
    #[derive(Debug)]
    struct Context(Box<dyn std::error::Error + 'static>);
    impl std::fmt::Display for Context {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "while doing it")
        }
    }
    impl std::error::Error for Context {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(self.0.as_ref())
        }
    }

    #[test]
    fn errors_map_through_their_sources() {
        let usage = Context(Box::new(Failure::usage("bad")));
        assert_eq!(Exit::of_error(&usage), Exit::Usage);
        let invalid = Context(Box::new(punctual_rt::RtError::Invalid("prio".into())));
        assert_eq!(Exit::of_error(&invalid), Exit::Usage);
        let io = std::io::Error::other("disk");
        assert_eq!(Exit::of_error(&io), Exit::System);
        assert_eq!(Exit::of_error(&Context(Box::new(io))), Exit::System);
    }
}
