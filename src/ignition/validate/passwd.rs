//! The `passwd` section: user and group names unique, and each user's groups and SSH keys.

use super::super::json::{join_index, join_key};
use super::super::Config;
use super::Validator;

impl Validator {
    pub(super) fn passwd_duplicates(&mut self, c: &Config) {
        if let Some(passwd) = &c.passwd {
            let groups = passwd.groups.as_deref().unwrap_or_default();
            self.dups("passwd.groups", groups.iter().map(|g| g.name.clone()));
            let users = passwd.users.as_deref().unwrap_or_default();
            self.dups("passwd.users", users.iter().map(|u| u.name.clone()));
            for (i, u) in users.iter().enumerate() {
                let path = join_index("passwd.users", i);
                self.dups(
                    &join_key(&path, "groups"),
                    u.groups.iter().flatten().cloned(),
                );
                self.dups(
                    &join_key(&path, "sshAuthorizedKeys"),
                    u.ssh_authorized_keys.iter().flatten().cloned(),
                );
            }
        }
    }
}
