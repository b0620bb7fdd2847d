//! Settings that take one word from a fixed list (`--driver epoll`,
//! `symlinks = "never"`).
//!
//! Owns the `choice!` macro, which turns an enum written with one word per
//! variant into a `clap::ValueEnum` (the flag's parser and its words), and
//! from that derives its serde form (the TOML key and the effective config),
//! `name()` and `FromStr`; and the text refusing a word not on the list.
//! Does not own the enums themselves: each lives with the feature it
//! configures (`Symlinks` in `static_files`, `UnknownHost` in `sites`,
//! `ListenerMode` in `config::listen`), nor the refusal of a flag's word,
//! which names the setting (`config::choice`).
//!
//! Why at the top and not in `config/`: a feature declares its own words
//! here without importing `config`, which reads those features (issue 25:
//! no import cycle between the top-level modules).

/// A word-valued setting, made by `choice!` (the effective config shows
/// it as its word: `config::setting`'s `Echo`).
pub trait Choice: Copy {}

/// Declares a word-valued setting's enum: `Variant = "word" | "alias",`.
macro_rules! choice {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $word:tt $(| $alias:tt)*, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
        pub enum $name {
            $(
                $(#[$vmeta])*
                #[value(name = $word $(, alias = $alias)*)]
                $variant,
            )*
        }

        impl $name {
            /// The word the flag, the file and the effective config use.
            pub fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $word, )*
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            /// The flag's parser (aliases included), for callers holding text.
            fn from_str(s: &str) -> Result<Self, String> {
                <Self as clap::ValueEnum>::from_str(s, false)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            /// A word read with the flag's parser, so the file accepts what
            /// the flag accepts and refuses it in the same words.
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let word = String::deserialize(d)?;
                <Self as clap::ValueEnum>::from_str(&word, false).map_err(|_| {
                    let all = <Self as clap::ValueEnum>::value_variants();
                    let words = all.iter().map(|v| v.name());
                    serde::de::Error::custom($crate::choice::not_a_choice(&word, words))
                })
            }
        }

        impl $crate::choice::Choice for $name {}
    };
}
pub(crate) use choice;

/// Why `word` is refused where one of `allowed` is wanted.
pub(crate) fn not_a_choice<'a>(
    word: &str,
    allowed: impl ExactSizeIterator<Item = &'a str>,
) -> String {
    let n = allowed.len();
    let mut list = String::new();
    for (i, w) in allowed.enumerate() {
        if i > 0 {
            list.push_str(if i + 1 == n { " or " } else { ", " });
        }
        list.push_str(w);
    }
    format!("{word:?} is not a choice; use {list}")
}
