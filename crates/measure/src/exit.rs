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
            Exit::Interrupted => 130,
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
}
