use super::*;

#[test]
fn device_numbers_split_as_glibc_does() {
    // makedev(254, 0), makedev(8, 1), makedev(0x123, 0x45678).
    assert_eq!(major_minor(0xfe00), (254, 0));
    assert_eq!(major_minor(0x0801), (8, 1));
    let dev = (0x45678 & 0xff) | ((0x123 & 0xfff) << 8) | ((0x45678 & !0xff) << 12);
    assert_eq!(major_minor(dev), (0x123, 0x45678));
}

#[test]
fn lock_lines_are_read_for_holders_only() {
    assert_eq!(
        parse_lock("1: POSIX  ADVISORY  READ 23949 fe:00:10109006 1073741826 1073742335"),
        Some((23949, (254, 0, 10_109_006)))
    );
    assert_eq!(
        parse_lock("1: -> POSIX  ADVISORY  WRITE 23950 fe:00:10109006 0 EOF"),
        None
    );
    assert_eq!(
        parse_lock("2: FLOCK  ADVISORY  WRITE 23949 fe:00:10109006 0 EOF"),
        None
    );
    assert_eq!(
        parse_lock("3: OFDLCK ADVISORY  READ -1 fe:00:10109006 0 EOF"),
        None
    );
    assert_eq!(parse_lock("4: POSIX  ADVISORY  READ 0 fe:00:1 0 EOF"), None);
    assert_eq!(parse_lock("garbage"), None);
}

#[test]
fn a_process_on_the_database_but_not_its_index_is_found() {
    let database = FileId {
        dev: 0xfe00,
        ino: 100,
    };
    let index = FileId {
        dev: 0xfe00,
        ino: 102,
    };
    let text = "\
1: POSIX  ADVISORY  READ 10 fe:00:100 1073741826 1073742335
2: POSIX  ADVISORY  READ 10 fe:00:102 128 128
3: POSIX  ADVISORY  READ 11 fe:00:100 1073741826 1073742335
4: POSIX  ADVISORY  READ 11 fe:00:999 128 128
5: POSIX  ADVISORY  READ 12 fe:00:100 1073741826 1073742335
6: POSIX  ADVISORY  READ 13 fe:01:100 1073741826 1073742335
";
    // 10 uses both; 11 another index; 12 is this process; 13 another device.
    assert_eq!(split_users_in(text, database, index, 12), vec![11]);
    assert_eq!(split_users_in("", database, index, 12), Vec::<u32>::new());
}
