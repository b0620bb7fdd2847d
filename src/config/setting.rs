//! How one declaration per setting becomes everything the setting needs.
//!
//! Owns the `settings!` macro, [`Field`] (a setting's TOML key and flag),
//! [`Merge`] (how a flag overrides the file), [`Echo`] (how a validated value
//! is written back in its file form), and the field-local rules several
//! settings share: [`or`] and [`optional`] (the default), [`seconds`],
//! [`positive`], [`within`]. Does not own any setting (they are declared in
//! `raw.rs`) nor any cross-field rule (the concern modules).
//!
//! A declaration `name: Raw => Checked = rule, shown |c| expr;` yields:
//! 1. the field `name: Raw` of `RawConfig`, which is the TOML key `name` and
//!    the flag `--name` (with `-` for `_`), its doc comment being the help;
//! 2. its line of `RawConfig::merge`;
//! 3. the field `name: Checked` of `Checked`: `rule` applied to the value as
//!    written, its errors naming `--name` (a file-only setting's rule names
//!    its key, e.g. `root`, `headers.set`);
//! 4. the constant `field::name` (key and flag, for cross-field errors);
//! 5. its key of the effective config: `expr` read from the validated
//!    `Config` (bound to `c`) and echoed into `Raw`.
//!
//! Two markers, written between the rule and `shown`, put a setting in a
//! second place without writing it again:
//! - `per site Site, shown |f| expr,`: the `[[site]]` table gets the field
//!   `name: Site` (an `Option`; see [`Override`]); `Checked::for_site`
//!   runs the same rule on a site's value (its errors naming `site.name`),
//!   and `SiteRaw::showing` echoes `expr`, read from the site's
//!   `FilesConfig` (bound to `f`);
//! - `h2 field,`: the validated value is the field `field` of the HTTP/2
//!   layer's `Http2Conn` (its path is given after the settings), which
//!   `Checked::http2_conn` fills and the layer takes as it is.
//!
//! After the settings come the rest of `SiteRaw` (who a site is: name,
//! hosts, root, identity) and the path of the type the `h2` settings fill.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use super::units::{Seconds, Size, DURATION_FORMS};
use super::{invalid, Error};

/// One setting's names: how the file and the command line spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    /// The TOML key, e.g. `drain_timeout`.
    pub key: &'static str,
    /// The flag, e.g. `--drain-timeout`; what errors name.
    pub flag: &'static str,
}

impl Field {
    /// An error naming this setting by its flag.
    pub(crate) fn invalid(self, problem: impl Into<String>) -> Error {
        invalid(self.flag, problem)
    }
}

/// `--` and the key with `-` for `_`, as bytes (`N` is the key's length + 2):
/// the flag clap derives from a field name, computed at compile time.
pub(crate) const fn flag_bytes<const N: usize>(key: &str) -> [u8; N] {
    let key = key.as_bytes();
    // All dashes: the `--` prefix, and every `_` left as it is.
    let mut out = [b'-'; N];
    let mut i = 0;
    while i < key.len() {
        if key[i] != b'_' {
            out[i + 2] = key[i];
        }
        i += 1;
    }
    out
}

/// Declares every setting at once; see the module doc for what one
/// declaration yields. Used once, in `raw.rs`.
macro_rules! settings {
    (
        $(#[$struct_meta:meta])*
        pub struct RawConfig {
            $(
                $(#[$meta:meta])*
                $name:ident: $raw:ty => $checked:ty = $rule:expr,
                    $( per site $site_raw:ty, shown |$f:pat_param| $site_shown:expr, )?
                    $( h2 $h2_field:ident, )?
                    $( h3 $h3_field:ident, )?
                    shown |$c:pat_param| $shown:expr;
            )*
        }

        $(#[$site_meta:meta])*
        pub struct SiteRaw over $files:ty {
            $( $(#[$own_meta:meta])* pub $own:ident: $own_ty:ty, )*
        }

        http2 = $h2_conn:path;
        http3 = $h3_conn:path;
    ) => {
        $(#[$struct_meta])*
        pub struct RawConfig {
            $( $(#[$meta])* pub $name: $raw, )*
        }

        /// Every setting after its default and its own rule, in declaration
        /// order; the cross-field rules run on this.
        #[derive(Clone)]
        pub(crate) struct Checked {
            $( pub(crate) $name: $checked, )*
        }

        /// Each setting's key and flag, by its key.
        #[allow(non_upper_case_globals)]
        pub(crate) mod field {
            use $crate::config::setting::{flag_bytes, Field};
            $(
                pub(crate) const $name: Field = Field {
                    key: stringify!($name),
                    flag: {
                        const KEY: &str = stringify!($name);
                        const BYTES: [u8; KEY.len() + 2] = flag_bytes(KEY);
                        match ::std::str::from_utf8(&BYTES) {
                            Ok(flag) => flag,
                            Err(_) => panic!("setting keys are ASCII"),
                        }
                    },
                };
            )*
        }

        /// Every setting, in declaration order.
        pub(crate) const FIELDS: &[$crate::config::setting::Field] = &[$(field::$name),*];

        /// The keys a `[[site]]` table may set (the settings marked `per
        /// site`), which docs/sites.md must list (a test checks).
        #[cfg(test)]
        pub(crate) const SITE_KEYS: &[&str] = &[$( $( {
            let _: Option<&$site_raw> = None;
            stringify!($name)
        }, )? )*];

        impl RawConfig {
            /// Overlay `over` (the command line) on `self` (the file).
            pub fn merge(mut self, over: RawConfig) -> RawConfig {
                $( $crate::config::setting::Merge::merge(&mut self.$name, over.$name); )*
                self
            }

            /// Apply each setting's default and own rule; the first error wins.
            pub(crate) fn check(self) -> Result<Checked, $crate::config::Error> {
                Ok(Checked {
                    $( $name: ($rule)(field::$name, self.$name)?, )*
                })
            }
        }

        $(#[$site_meta])*
        pub struct SiteRaw {
            $( $(#[$own_meta])* pub $own: $own_ty, )*
            $( $(
                #[doc = concat!("`", stringify!($name), "` for this site (else the top level's).")]
                #[serde(skip_serializing_if = "Option::is_none")]
                pub $name: $site_raw,
            )? )*
        }

        impl Checked {
            /// These settings with what `site` overrides (the settings
            /// marked `per site`), each through its own rule; an error
            /// names `site.<key>`.
            pub(crate) fn for_site(&self, site: &SiteRaw) -> Result<Checked, $crate::config::Error> {
                let mut c = self.clone();
                $( $(
                    let given: &$site_raw = &site.$name;
                    if let Some(v) = $crate::config::setting::Override::<$raw>::given(given.clone()) {
                        let key = concat!("site.", stringify!($name));
                        let field = $crate::config::setting::Field { key, flag: key };
                        c.$name = ($rule)(field, v)?;
                    }
                )? )*
                Ok(c)
            }

            /// What each HTTP/2 connection applies (the settings marked `h2`).
            pub(crate) fn http2_conn(&self) -> $h2_conn {
                $h2_conn {
                    $( $( $h2_field: self.$name.clone(), )? )*
                }
            }

            /// What each HTTP/3 connection applies (the settings marked `h3`).
            pub(crate) fn http3_conn(&self) -> $h3_conn {
                $h3_conn {
                    $( $( $h3_field: self.$name.clone(), )? )*
                }
            }
        }

        impl SiteRaw {
            /// `self` with each `per site` setting shown as `files` has it.
            pub(crate) fn showing(mut self, files: &$files) -> SiteRaw {
                $( $(
                    self.$name = {
                        let $f = files;
                        <$site_raw as $crate::config::setting::Override<$raw>>::shown(
                            $crate::config::setting::Echo::echo(&$site_shown),
                        )
                    };
                )? )*
                self
            }
        }

        impl $crate::config::Config {
            /// The effective configuration in file form: every setting as
            /// validated, defaults filled in (`check-config` prints this,
            /// and `--help` reads its defaults from it).
            pub fn effective(&self) -> RawConfig {
                RawConfig {
                    $( $name: {
                        let $c = self;
                        $crate::config::setting::Echo::echo(&$shown)
                    }, )*
                }
            }
        }
    };
}
pub(crate) use settings;

/// How a `[[site]]` table's value (`Self`, always an `Option`) stands for
/// the top level's value as written (`Raw`): whether the site gives one,
/// and how a site's validated value is shown.
pub(crate) trait Override<Raw>: Sized {
    /// The value as the top level would have written it, if the site gives one.
    fn given(self) -> Option<Raw>;
    /// A site's value in its table's form.
    fn shown(raw: Raw) -> Self;
}

impl<T> Override<Option<T>> for Option<T> {
    fn given(self) -> Option<Option<T>> {
        self.map(Some)
    }
    fn shown(raw: Option<T>) -> Self {
        raw
    }
}

/// A switch (`autoindex`): on or off at the top level, unset or either in a site.
impl Override<bool> for Option<bool> {
    fn given(self) -> Option<bool> {
        self
    }
    fn shown(raw: bool) -> Self {
        Some(raw)
    }
}

/// How a value given on the command line overrides the file's.
pub(crate) trait Merge {
    fn merge(&mut self, over: Self);
}

impl<T> Merge for Option<T> {
    /// A flag given wins; one left out keeps the file's value.
    fn merge(&mut self, over: Self) {
        if over.is_some() {
            *self = over;
        }
    }
}

impl Merge for bool {
    /// A switch is on if the file or the command line turns it on.
    fn merge(&mut self, over: Self) {
        *self |= over;
    }
}

/// A validated value written back in its file form `Raw`, in the file's
/// units (seconds, bytes), for the effective config.
pub(crate) trait Echo<Raw> {
    fn echo(&self) -> Raw;
}

/// A word-valued setting shows its word.
impl<T: crate::choice::Choice> Echo<Option<T>> for T {
    fn echo(&self) -> Option<T> {
        Some(*self)
    }
}

impl Echo<bool> for bool {
    fn echo(&self) -> bool {
        *self
    }
}

impl Echo<Option<Seconds>> for Duration {
    fn echo(&self) -> Option<Seconds> {
        Some(Seconds::from(*self))
    }
}

impl Echo<Option<Seconds>> for Option<Duration> {
    fn echo(&self) -> Option<Seconds> {
        self.map(Seconds::from)
    }
}

impl Echo<Option<Size>> for usize {
    fn echo(&self) -> Option<Size> {
        Some(Size(*self as u64))
    }
}

impl Echo<Option<Size>> for u64 {
    fn echo(&self) -> Option<Size> {
        Some(Size(*self))
    }
}

impl Echo<Option<Size>> for Option<u64> {
    fn echo(&self) -> Option<Size> {
        self.map(Size)
    }
}

impl Echo<Option<u64>> for NonZeroUsize {
    fn echo(&self) -> Option<u64> {
        Some(self.get() as u64)
    }
}

impl Echo<Option<u64>> for usize {
    fn echo(&self) -> Option<u64> {
        Some(*self as u64)
    }
}

impl Echo<Option<u64>> for u64 {
    fn echo(&self) -> Option<u64> {
        Some(*self)
    }
}

impl Echo<Option<u64>> for Option<u64> {
    fn echo(&self) -> Option<u64> {
        *self
    }
}

impl Echo<Option<String>> for String {
    fn echo(&self) -> Option<String> {
        Some(self.clone())
    }
}

impl Echo<Option<String>> for Option<String> {
    fn echo(&self) -> Option<String> {
        self.clone()
    }
}

impl Echo<Option<Vec<String>>> for Vec<String> {
    fn echo(&self) -> Option<Vec<String>> {
        Some(self.clone())
    }
}

impl Echo<Option<String>> for Option<SocketAddr> {
    fn echo(&self) -> Option<String> {
        self.map(|a| a.to_string())
    }
}

impl Echo<Option<Vec<String>>> for Vec<SocketAddr> {
    fn echo(&self) -> Option<Vec<String>> {
        Some(self.iter().map(ToString::to_string).collect())
    }
}

impl Echo<Option<PathBuf>> for PathBuf {
    /// As displayed: a path that is not UTF-8 is shown lossily rather than
    /// failing the whole output.
    fn echo(&self) -> Option<PathBuf> {
        Some(PathBuf::from(self.display().to_string()))
    }
}

impl Echo<Option<PathBuf>> for Option<PathBuf> {
    fn echo(&self) -> Option<PathBuf> {
        self.as_ref().and_then(Echo::echo)
    }
}

/// The longest timeout most settings accept: a day.
pub(crate) const DAY: f64 = 86_400.0;

/// `rule` applied to the value given, else to `default`. The value as
/// written may be a wrapper of what the rule reads (a [`Size`] of bytes, a
/// [`Seconds`]), so rules and defaults stay plain numbers.
pub(crate) fn or<W: Into<T>, T, U>(
    default: T,
    rule: impl FnOnce(Field, T) -> Result<U, Error>,
) -> impl FnOnce(Field, Option<W>) -> Result<U, Error> {
    move |field, v| rule(field, v.map_or(default, Into::into))
}

/// `rule` applied to the value if one is given; unset stays unset.
pub(crate) fn optional<W: Into<T>, T, U>(
    rule: impl FnOnce(Field, T) -> Result<U, Error>,
) -> impl FnOnce(Field, Option<W>) -> Result<Option<U>, Error> {
    move |field, v| v.map(|v| rule(field, v.into())).transpose()
}

/// The value as written: its type is its whole rule.
pub(crate) fn as_is<T>(_: Field, v: T) -> Result<T, Error> {
    Ok(v)
}

/// A size or count with no bound beyond its type.
pub(crate) fn as_usize(_: Field, v: u64) -> Result<usize, Error> {
    Ok(v as usize)
}

/// A count of at least one.
pub(crate) fn positive(field: Field, v: u64) -> Result<NonZeroUsize, Error> {
    NonZeroUsize::new(v as usize).ok_or_else(|| field.invalid("0 is not allowed; use 1 or more"))
}

/// A number in `range`.
pub(crate) fn within(
    range: RangeInclusive<usize>,
) -> impl FnOnce(Field, u64) -> Result<usize, Error> {
    move |field, v| {
        let v = v as usize;
        if range.contains(&v) {
            Ok(v)
        } else {
            Err(field.invalid(format!(
                "{v} is outside {}..={}",
                range.start(),
                range.end()
            )))
        }
    }
}

/// A duration in `(0, max]` seconds.
pub(crate) fn seconds(max: f64) -> impl FnOnce(Field, f64) -> Result<Duration, Error> {
    move |field, v| {
        if v.is_finite() && v > 0.0 && v <= max {
            Ok(Duration::from_secs_f64(v))
        } else {
            Err(field.invalid(format!(
                "{} is not a duration in (0, {}]; write {DURATION_FORMS}",
                Seconds(v),
                Seconds(max)
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: Field = Field {
        key: "some_key",
        flag: "--some-key",
    };

    #[test]
    fn flag_is_the_key_in_kebab_case() {
        const B: [u8; 10] = flag_bytes("some_key");
        assert_eq!(&B, b"--some-key");
    }

    #[test]
    fn a_flag_overrides_and_a_switch_accumulates() {
        let mut file = Some(1);
        file.merge(None);
        assert_eq!(file, Some(1));
        file.merge(Some(2));
        assert_eq!(file, Some(2));
        let mut on = true;
        on.merge(false);
        assert!(on);
    }

    #[test]
    fn or_supplies_the_default_and_optional_keeps_unset() {
        assert_eq!(or(5, as_is)(F, None::<i32>).unwrap(), 5);
        assert_eq!(or(5, as_is)(F, Some(6)).unwrap(), 6);
        assert_eq!(optional(positive)(F, None::<u64>).unwrap(), None);
        let e = optional(positive)(F, Some(0u64)).unwrap_err().to_string();
        assert_eq!(e, "--some-key: 0 is not allowed; use 1 or more");
    }

    #[test]
    fn seconds_refuse_zero_nan_and_too_long() {
        assert_eq!(seconds(DAY)(F, 1.5).unwrap(), Duration::from_millis(1500));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, DAY + 1.0] {
            let e = seconds(DAY)(F, bad).unwrap_err().to_string();
            assert!(e.starts_with("--some-key: "), "{e}");
            assert!(
                e.contains("is not a duration in (0, 1d]; write seconds"),
                "{e}"
            );
        }
    }

    #[test]
    fn within_names_the_range() {
        assert_eq!(within(1..=3)(F, 3).unwrap(), 3);
        let e = within(1..=3)(F, 4).unwrap_err().to_string();
        assert_eq!(e, "--some-key: 4 is outside 1..=3");
    }

    #[test]
    fn durations_echo_as_seconds_and_absent_values_stay_absent() {
        let s: Option<Seconds> = Duration::from_millis(250).echo();
        assert_eq!(s, Some(Seconds(0.25)));
        let admin: Option<String> = None::<SocketAddr>.echo();
        assert_eq!(admin, None);
    }
}
