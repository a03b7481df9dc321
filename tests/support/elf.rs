//! What an ELF executable says about how it links, read the way openshift/check-payload reads
//! it (internal/validations: `isElfExe`, `isStatic`, `validateExeOpenssl`): its type, whether
//! it has a `PT_INTERP` program header (none means statically linked: `ErrNotDynLinked`),
//! `DF_1_PIE` for `ET_DYN` files (without it the file counts as a shared object, not an
//! executable) and the `DT_NEEDED` libraries (OpenSSL counts as used when one starts with
//! `libcrypto.so`). Used by the FIPS tests on the binary under test and by the image-context
//! test on the binary the Dockerfile's build produces. 64-bit little-endian files only.

/// `e_type` of a fixed-address executable.
pub const ET_EXEC: u16 = 2;
/// `e_type` of a position-independent executable or a shared object.
pub const ET_DYN: u16 = 3;

/// The facts check-payload reads from an ELF file.
#[derive(Debug)]
pub struct ElfFacts {
    /// `e_type`.
    pub executable_type: u16,
    /// A `PT_INTERP` program header: dynamically linked.
    pub has_interpreter: bool,
    /// `DF_1_PIE` in `DT_FLAGS_1`.
    pub pie: bool,
    /// The `DT_NEEDED` library names, in order.
    pub needed: Vec<String>,
}

impl ElfFacts {
    /// check-payload takes the file for an executable: `ET_EXEC`, or `ET_DYN` marked PIE.
    pub fn is_executable(&self) -> bool {
        self.executable_type == ET_EXEC || (self.executable_type == ET_DYN && self.pie)
    }
}

/// Reads the facts from the bytes of an ELF file; panics (a test failure) on anything that is
/// not a 64-bit little-endian ELF file with consistent headers.
pub fn read(bytes: &[u8]) -> ElfFacts {
    const PT_LOAD: u32 = 1;
    const PT_DYNAMIC: u32 = 2;
    const PT_INTERP: u32 = 3;
    const DT_NULL: u64 = 0;
    const DT_NEEDED: u64 = 1;
    const DT_STRTAB: u64 = 5;
    const DT_FLAGS_1: u64 = 0x6fff_fffb;
    const DF_1_PIE: u64 = 0x0800_0000;
    let u16_at = |at: usize| u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());

    assert_eq!(&bytes[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(bytes[4], 2, "64-bit ELF expected");
    assert_eq!(bytes[5], 1, "little-endian ELF expected");
    let executable_type = u16_at(16);
    let (phoff, phentsize, phnum) = (u64_at(32) as usize, u16_at(54) as usize, u16_at(56));
    let headers: Vec<(u32, u64, u64, u64)> = (0..usize::from(phnum))
        .map(|i| {
            let at = phoff + i * phentsize;
            // (type, offset, vaddr, filesz)
            (u32_at(at), u64_at(at + 8), u64_at(at + 16), u64_at(at + 32))
        })
        .collect();
    let has_interpreter = headers.iter().any(|h| h.0 == PT_INTERP);
    let mut needed_offsets = Vec::new();
    let (mut strtab, mut flags_1) = (None, 0);
    if let Some(&(_, offset, _, size)) = headers.iter().find(|h| h.0 == PT_DYNAMIC) {
        for entry in (offset..offset + size).step_by(16) {
            let (tag, value) = (u64_at(entry as usize), u64_at(entry as usize + 8));
            match tag {
                DT_NULL => break,
                DT_NEEDED => needed_offsets.push(value),
                DT_STRTAB => strtab = Some(value),
                DT_FLAGS_1 => flags_1 = value,
                _ => {}
            }
        }
    }
    // DT_STRTAB is a virtual address: find the loaded segment holding it.
    let strtab_file_offset = strtab.map(|address| {
        let &(_, offset, vaddr, _) = headers
            .iter()
            .find(|h| h.0 == PT_LOAD && h.2 <= address && address < h.2 + h.3)
            .expect("DT_STRTAB inside a loaded segment");
        (address - vaddr + offset) as usize
    });
    let needed = needed_offsets
        .iter()
        .map(|name| {
            let start = strtab_file_offset.expect("DT_NEEDED without DT_STRTAB") + *name as usize;
            let end = start + bytes[start..].iter().position(|b| *b == 0).unwrap();
            String::from_utf8(bytes[start..end].to_vec()).unwrap()
        })
        .collect();
    ElfFacts {
        executable_type,
        has_interpreter,
        pie: flags_1 & DF_1_PIE != 0,
        needed,
    }
}
