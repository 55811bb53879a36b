//! Space held back for a full disk, so the broker can go on serving consumers.
//!
//! On a full disk every redb commit fails, a pop's included: a lease is a write, and
//! redb's copy-on-write commit needs fresh pages even to change one row. A broker that
//! can only refuse would stop its consumers exactly when they are what frees space
//! (their acks complete messages that retention then deletes). So the broker holds a
//! reserve, a file of zeros beside the database (the "ballast" technique): at the
//! first commit that fails for lack of space it deletes the file, and from then on it
//! refuses every command that adds data (507 `storage_full`) while pops, acks, lease
//! extensions and deletes commit into the space the reserve gave back. Every few
//! seconds it tries to write the reserve again; once that succeeds, space has
//! returned and writes of every kind resume.
//!
//! Writing the reserve costs one sequential write at start (32 MiB by default for the
//! binary; measured here at about 20 ms on the CI machine's disk). The in-process
//! test broker holds none unless asked ([`crate::MockBrokerBuilder::storage_reserve`]).

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::PathBuf;

/// Space that can be given back on a full disk and taken again once space returns.
pub trait Reserve: Send + Sync {
    /// Gives the space back. Answers whether any was held.
    fn release(&self) -> io::Result<bool>;

    /// Takes the space again; an error (`ENOSPC`) while the disk is still full.
    fn restore(&self) -> io::Result<()>;
}

/// A reserve held as a file of zeros (written, not sparse, so its blocks are taken).
#[derive(Debug)]
pub struct FileReserve {
    path: PathBuf,
    bytes: u64,
}

/// The smallest reserve worth holding: below it a full disk has nothing to drain with.
pub const MIN_RESERVE: u64 = 1 << 20;

impl FileReserve {
    /// A reserve of `bytes` at `path`, written now (or kept, if a previous run left one
    /// of that size).
    pub fn create(path: PathBuf, bytes: u64) -> io::Result<Self> {
        let reserve = Self { path, bytes };
        if fs::metadata(&reserve.path).map(|m| m.len()).ok() != Some(bytes) {
            reserve.restore()?;
        }
        Ok(reserve)
    }

    /// [`Self::create`], sized down when `bytes` does not fit on the disk: the largest of
    /// `bytes / 2`, `bytes / 4`, ... that fits is found, and half of it is held, so the
    /// data keeps at least as much room as the reserve takes (a reserve that filled the
    /// disk would stop writes at once). `Ok(None)` when not even [`MIN_RESERVE`] fits.
    /// Any error but a full disk is an error.
    pub fn create_within(path: PathBuf, bytes: u64) -> io::Result<Option<Self>> {
        match Self::create(path.clone(), bytes) {
            Ok(r) => return Ok(Some(r)),
            Err(e) if !super::is_no_space(&e) => return Err(e),
            Err(_) => {}
        }
        let mut size = bytes / 2;
        while size >= MIN_RESERVE {
            match Self::create(path.clone(), size) {
                Ok(fits) => {
                    fits.release()?;
                    let half = size / 2;
                    return if half >= MIN_RESERVE {
                        Self::create(path, half).map(Some)
                    } else {
                        Ok(None)
                    };
                }
                Err(e) if super::is_no_space(&e) => size /= 2,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// The bytes it holds.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Reserve for FileReserve {
    fn release(&self) -> io::Result<bool> {
        match fs::remove_file(&self.path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn restore(&self) -> io::Result<()> {
        let written = (|| {
            let mut file = File::create(&self.path)?;
            let zeros = vec![0u8; 1 << 20];
            let mut left = self.bytes;
            while left > 0 {
                let n = left.min(zeros.len() as u64) as usize;
                file.write_all(&zeros[..n])?;
                left -= n as u64;
            }
            file.sync_all()
        })();
        if written.is_err() {
            // A partial reserve would hold space without being one.
            let _ = fs::remove_file(&self.path);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_reserve_is_released_and_restored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queen.redb.reserve");
        let r = FileReserve::create(path.clone(), 3 << 20).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), 3 << 20);
        assert!(r.release().unwrap());
        assert!(!path.exists());
        assert!(!r.release().unwrap(), "nothing left to give back");
        r.restore().unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), 3 << 20);
    }
}
