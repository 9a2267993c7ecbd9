//! Checks of the hardware definitions that both the driver and the model compile.

use ordma_hw::*;

#[test]
fn version_fields_split_major_and_minor() {
    assert_eq!(version_major(VERSION), 1);
    assert_eq!(version_minor(VERSION), 0);
    assert_eq!(version_major(0x0003_0007), 3);
    assert_eq!(version_minor(0x0003_0007), 7);
    assert_eq!(version_major(u32::MAX), 0xffff);
    assert_eq!(version_minor(u32::MAX), 0xffff);
}

#[test]
fn admin_command_round_trips_and_rejects_reserved_bits() {
    let params = QueryDeviceParams {
        resp_addr: 0x1234_5678_9abc_d000,
        resp_len: 64,
    }
    .encode();
    let cmd = AdminCmd {
        opcode: CMD_QUERY_DEVICE,
        cmd_id: 0xdead_beef,
        params,
    };
    let b = cmd.encode();
    assert_eq!(
        &b[4..8],
        &[0xef, 0xbe, 0xad, 0xde],
        "cmd_id is little-endian at 4"
    );
    assert_eq!(AdminCmd::decode(&b), Some(cmd));
    let q = QueryDeviceParams::decode(&cmd.params).expect("valid params");
    assert_eq!((q.resp_addr, q.resp_len), (0x1234_5678_9abc_d000, 64));
    for off in 1..4 {
        let mut bad = b;
        bad[off] = 1;
        assert_eq!(AdminCmd::decode(&bad), None, "reserved byte {off}");
    }
    let mut p = params;
    p[20] = 1;
    assert_eq!(QueryDeviceParams::decode(&p), None);
}

#[test]
fn completions_and_events_round_trip() {
    let c = AdminCompletion {
        cmd_id: 7,
        status: AQ_BAD_PARAM,
        phase: true,
        result: u64::MAX,
    };
    assert_eq!(AdminCompletion::decode(&c.encode()), c);
    assert_eq!(c.encode()[6], 1, "phase is bit 0 of byte 6");
    let e = Event {
        kind: EVENT_PORT_ACTIVE,
        phase: false,
        data: 1,
        data2: 2,
    };
    assert_eq!(Event::decode(&e.encode()), e);
}

#[test]
fn device_attrs_round_trip() {
    let a = DeviceAttrs {
        fw_version: 1 << 32,
        node_guid: 0x0200_00ff_fe00_0001,
        page_size_cap: (1 << 12) | (1 << 21) | (1 << 30),
        max_qp: 1,
        max_qp_wr: 2,
        max_cq: 3,
        max_cqe: 4,
        max_mr: 5,
        max_pd: 6,
        max_sge: 7,
        num_ports: 1,
        vendor_part_id: 9,
        hw_ver: 10,
    };
    let b = a.encode();
    assert_eq!(DeviceAttrs::decode(&b), a);
    assert_eq!(get_le32(&b, 60), Some(10), "hw_ver is the last word");
}

#[test]
fn byte_accessors_are_bounds_checked() {
    let mut b = [0u8; 8];
    assert_eq!(get_le64(&b, 1), None);
    assert_eq!(get_le32(&b, usize::MAX), None);
    assert!(!put_le32(&mut b, 6, 1));
    assert!(put_le32(&mut b, 4, 0x0102_0304));
    assert_eq!(b[4..], [4, 3, 2, 1]);
}

#[test]
fn port_attrs_and_params_round_trip() {
    let a = PortAttrs {
        state: PORT_STATE_ACTIVE,
        phys_state: PHYS_STATE_LINK_UP,
        max_mtu: MTU_4096,
        active_mtu: 3,
        lid: 0x1234,
        sm_lid: 2,
        port_guid: 0x0200_0000_0000_0001,
        gid_tbl_len: 1,
        pkey_tbl_len: 1,
        link_width: 1,
        link_speed: 1,
        max_msg_sz: 1 << 31,
    };
    let b = a.encode();
    assert_eq!(PortAttrs::decode(&b), a);
    assert_eq!(&b[4..6], &[0x34, 0x12], "lid is little-endian at 4");
    let p = QueryPortParams {
        port: 1,
        resp_addr: 0x1000,
        resp_len: 32,
    };
    let mut e = p.encode();
    assert_eq!(QueryPortParams::decode(&e), Some(p));
    e[5] = 1;
    assert_eq!(QueryPortParams::decode(&e), None);
}
