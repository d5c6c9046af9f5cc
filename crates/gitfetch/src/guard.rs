//! Addresses a remote load never reaches: link-local addresses (169.254.0.0/16, fe80::/10),
//! where clouds serve instance metadata and node credentials, AWS's IPv6 metadata address
//! (fd00:ec2::254) and GCP's metadata host name. A tenant's kustomization could otherwise read
//! the node's credentials into a ConfigMap through a remote file. Every host is checked before
//! a request, every name again on each resolution (so a name cannot be rebound to such an
//! address between the check and the connection), and every redirect target.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

/// Host names served by a cloud's metadata server whatever they resolve to.
const METADATA_NAMES: &[&str] = &["metadata.google.internal"];

/// AWS's instance metadata service over IPv6.
const AWS_METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

/// Why a remote load was refused: its host is, or resolves to, a metadata address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}, which remote loads never reach")]
pub(crate) struct Refusal(String);

/// True for the addresses no remote load may connect to (IPv4-mapped IPv6 addresses are
/// judged as the IPv4 address they carry).
pub(crate) fn is_refused(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.is_link_local(),
            None => (v6.segments()[0] & 0xffc0) == 0xfe80 || v6 == AWS_METADATA_V6,
        },
    }
}

/// Checks a URL's host (a name, an IPv4 address or a bracketed IPv6 address) before anything
/// is sent to it.
pub(crate) fn check_host(host: &str) -> Result<(), Refusal> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return if is_refused(ip) {
            Err(Refusal(format!(
                "{host} is a link-local or cloud metadata address"
            )))
        } else {
            Ok(())
        };
    }
    let name = bare.trim_end_matches('.').to_ascii_lowercase();
    if METADATA_NAMES.contains(&name.as_str()) {
        return Err(Refusal(format!("{host} is a cloud metadata host name")));
    }
    Ok(())
}

/// Checks the addresses a name resolved to: refused if any of them is refused.
pub(crate) fn check_resolved(host: &str, addrs: &[SocketAddr]) -> Result<(), Refusal> {
    match addrs.iter().find(|addr| is_refused(addr.ip())) {
        Some(addr) => Err(Refusal(format!(
            "{host} resolves to {}, a link-local or cloud metadata address",
            addr.ip()
        ))),
        None => Ok(()),
    }
}

/// The refusal in an error's chain of sources, if the error is one.
pub(crate) fn refusal_in(error: &(dyn std::error::Error + 'static)) -> Option<Refusal> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(refusal) = e.downcast_ref::<Refusal>() {
            return Some(refusal.clone());
        }
        current = e.source();
    }
    None
}

/// The system resolver, refusing names that are or resolve to refused addresses.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GuardedResolver;

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            check_host(&host)?;
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            check_resolved(&host, &addrs)?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// A redirect policy that follows up to `max` redirects, never to a refused host.
pub(crate) fn redirect_policy(max: usize) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if let Some(Err(refusal)) = attempt.url().host_str().map(check_host) {
            return attempt.error(refusal);
        }
        if attempt.previous().len() > max {
            attempt.error(format!("stopped after {max} redirects"))
        } else {
            attempt.follow()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_local_and_metadata_addresses_are_refused() {
        for ip in [
            "169.254.169.254",
            "169.254.0.1",
            "fe80::1",
            "febf::1",
            "fd00:ec2::254",
            "::ffff:169.254.169.254",
        ] {
            assert!(is_refused(ip.parse().unwrap()), "{ip} must be refused");
        }
        for ip in [
            "127.0.0.1",
            "10.0.0.1",
            "169.253.255.255",
            "169.255.0.1",
            "::1",
            "fec0::1",
            "fd00:ec2::253",
            "140.82.112.3",
        ] {
            assert!(!is_refused(ip.parse().unwrap()), "{ip} must be allowed");
        }
    }

    #[test]
    fn hosts_are_checked_as_literals_and_metadata_names() {
        assert!(check_host("169.254.169.254").is_err());
        assert!(check_host("[fd00:ec2::254]").is_err());
        assert!(check_host("Metadata.Google.Internal.").is_err());
        assert!(check_host("github.com").is_ok());
        assert!(check_host("[::1]").is_ok());
        let refusal = check_host("metadata.google.internal").unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "metadata.google.internal is a cloud metadata host name, which remote loads never \
             reach"
        );
    }

    #[test]
    fn a_name_is_refused_when_any_of_its_addresses_is() {
        let addrs: Vec<SocketAddr> = vec![
            "140.82.112.3:0".parse().unwrap(),
            "169.254.169.254:0".parse().unwrap(),
        ];
        let refusal = check_resolved("rebound.example", &addrs).unwrap_err();
        assert!(
            refusal
                .to_string()
                .starts_with("rebound.example resolves to 169.254.169.254,")
        );
        assert!(check_resolved("github.com", &addrs[..1]).is_ok());
    }
}
