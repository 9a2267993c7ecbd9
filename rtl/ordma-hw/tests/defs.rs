//! Checks of the hardware definitions that both the driver and the model compile.

use ordma_hw::*;

#[test]
fn version_fields_split_major_and_minor() {
    assert_eq!(version_major(VERSION), 1);
    assert_eq!(version_minor(VERSION), 10, "1.10: per-QP counters");
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
        max_srq: 11,
        max_srq_wr: 12,
        max_srq_sge: 13,
        atomic_cap: ATOMIC_CAP_HCA,
        max_mw: 14,
    };
    let b = a.encode();
    assert_eq!(b.len(), 96, "1.2's attributes are 96 bytes");
    assert_eq!(DeviceAttrs::decode(&b), a);
    assert_eq!(get_le32(&b, 60), Some(10), "hw_ver @60");
    assert_eq!(
        (get_le32(&b, 64), get_le32(&b, 68), get_le32(&b, 72)),
        (Some(11), Some(12), Some(13)),
        "max_srq @64, max_srq_wr @68, max_srq_sge @72"
    );
    assert_eq!(get_le32(&b, 76), Some(1), "atomic_cap @76: IB_ATOMIC_HCA");
    assert_eq!(get_le32(&b, 80), Some(14), "max_mw @80 (1.9)");
    assert!(b[84..].iter().all(|&x| x == 0), "@84..96 reserved, zero");
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
        link_layer: LINK_LAYER_ETHERNET,
        mac: [2, 0x6f, 0x72, 0x64, 0, 1],
    };
    let b = a.encode();
    assert_eq!(PortAttrs::decode(&b), a);
    assert_eq!(&b[4..6], &[0x34, 0x12], "lid is little-endian at 4");
    assert_eq!(b[28], 2, "link_layer @28");
    assert_eq!(&b[32..38], &[2, 0x6f, 0x72, 0x64, 0, 1], "mac @32");
    assert!(b[29..32].iter().chain(&b[38..]).all(|&x| x == 0));
    let p = QueryPortParams {
        port: 1,
        resp_addr: 0x1000,
        resp_len: 32,
    };
    let mut e = p.encode();
    assert_eq!(QueryPortParams::decode(&e), Some(p));
    e[5] = 1;
    assert_eq!(QueryPortParams::decode(&e), None);
    let q = QueryQpCountersParams {
        qpn: 0x0012_3456,
        resp_addr: 0x1122_3344_5566_7788,
        resp_len: COUNTERS_SIZE as u32,
    };
    let mut e = q.encode();
    assert_eq!(&e[..4], &[0x56, 0x34, 0x12, 0], "qpn @0");
    assert_eq!(
        &e[8..16],
        &[0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11],
        "resp_addr @8"
    );
    assert_eq!(QueryQpCountersParams::decode(&e), Some(q));
    e[20] = 1;
    assert_eq!(QueryQpCountersParams::decode(&e), None);
    assert_eq!(CMD_QUERY_QP_COUNTERS, 0x18);
}

/// Every non-reserved byte of `bytes` set: decode must keep it, every reserved byte set
/// alone must be refused.
fn reserved_refused<T>(p: &Params, reserved: &[usize], decode: impl Fn(&Params) -> Option<T>) {
    for &off in reserved {
        let mut bad = *p;
        bad[off] = 0x5a;
        assert!(decode(&bad).is_none(), "reserved byte {off}");
    }
}

#[test]
fn create_mr_params_layout() {
    let m = CreateMrParams {
        pdn: 0x0102_0304,
        access: ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ,
        iova: 0x1111_2222_3333_4444,
        length: 0x5555_6666_7777_8888,
        pages: PageList {
            root: 0x9999_aaaa_bbbb_c000,
            npages: 0x00dd_eeff,
            page_shift: 21,
            levels: 3,
        },
    };
    let p = m.encode();
    assert_eq!(&p[0..4], &[4, 3, 2, 1], "pdn @0 little-endian");
    assert_eq!(get_le32(&p, 4), Some(5));
    assert_eq!(get_le64(&p, 8), Some(m.iova));
    assert_eq!(get_le64(&p, 16), Some(m.length));
    assert_eq!(get_le64(&p, 24), Some(m.pages.root));
    assert_eq!(get_le32(&p, 32), Some(0x00dd_eeff));
    assert_eq!((p[36], p[37]), (21, 3));
    assert_eq!(CreateMrParams::decode(&p), Some(m));
    reserved_refused(&p, &(38..56).collect::<Vec<_>>(), CreateMrParams::decode);
    let r = ModifyMrParams {
        key: mr_key(0x1234, 0x56),
        mr: m,
    };
    let q = r.encode();
    assert_eq!(
        &q[..38],
        &p[..38],
        "the registration as CREATE_MR lays it out"
    );
    assert_eq!(get_le32(&q, 40), Some(0x12_3456), "key @40");
    assert_eq!(ModifyMrParams::decode(&q), Some(r));
    let reserved: Vec<usize> = (38..40).chain(44..56).collect();
    reserved_refused(&q, &reserved, ModifyMrParams::decode);
}

#[test]
fn key_and_number_params_layout() {
    let k = KeyParams {
        key: mr_key(5, 0x7a),
    };
    assert_eq!(k.key, 0x57a);
    let p = k.encode();
    assert_eq!(KeyParams::decode(&p), Some(k));
    reserved_refused(&p, &[4, 55], KeyParams::decode);
    let n = NumParams { num: 77 };
    let p = n.encode();
    assert_eq!(get_le32(&p, 0), Some(77));
    assert_eq!(NumParams::decode(&p), Some(n));
    reserved_refused(&p, &[4, 30, 55], NumParams::decode);
}

#[test]
fn create_cq_params_layout() {
    let c = CreateCqParams {
        db_page: 7,
        log_depth: 10,
        log_cqe_size: 6,
        ring: PageList {
            root: 0x1234_5000,
            npages: 16,
            page_shift: 12,
            levels: 1,
        },
        db_record: 0xabc8,
    };
    let p = c.encode();
    assert_eq!(get_le32(&p, 0), Some(7));
    assert_eq!(&p[4..8], &[10, 6, 12, 1]);
    assert_eq!(get_le64(&p, 8), Some(0x1234_5000));
    assert_eq!(get_le32(&p, 16), Some(16));
    assert_eq!(get_le64(&p, 24), Some(0xabc8));
    assert_eq!(CreateCqParams::decode(&p), Some(c));
    reserved_refused(&p, &[20, 23, 32, 55], CreateCqParams::decode);
}

#[test]
fn resize_cq_params_layout() {
    assert_eq!(CMD_RESIZE_CQ, 0x15);
    let r = ResizeCqParams {
        cqn: 0x0102,
        log_depth: 9,
        ring: PageList {
            root: 0x0002_3456_7000,
            npages: 8,
            page_shift: 12,
            levels: 1,
        },
    };
    let p = r.encode();
    assert_eq!(get_le32(&p, 0), Some(0x0102));
    assert_eq!(&p[4..8], &[9, 0, 12, 1]);
    assert_eq!(get_le64(&p, 8), Some(0x0002_3456_7000));
    assert_eq!(get_le32(&p, 16), Some(8));
    assert_eq!(ResizeCqParams::decode(&p), Some(r));
    reserved_refused(&p, &[5, 20, 55], ResizeCqParams::decode);
}

#[test]
fn create_qp_params_layout() {
    let q = CreateQpParams {
        qp_type: QP_TYPE_RC,
        db_page: 0x0703,
        max_send_sge: 4,
        max_recv_sge: 2,
        pdn: 9,
        send_cqn: 10,
        recv_cqn: 11,
        max_inline: 64,
        flags: 0,
        sq: WorkQueue {
            log_depth: 8,
            log_wqe_size: 7,
            ring: PageList {
                root: 0x10_0000,
                npages: 8,
                page_shift: 12,
                levels: 1,
            },
        },
        rq: WorkQueue {
            log_depth: 6,
            log_wqe_size: 6,
            ring: PageList {
                root: 0x20_0000,
                npages: 1,
                page_shift: 21,
                levels: 2,
            },
        },
    };
    let p = q.encode();
    assert_eq!(&p[0..4], &[QP_TYPE_RC, 3, 4, 2]);
    assert_eq!(
        (get_le32(&p, 4), get_le32(&p, 8), get_le32(&p, 12)),
        (Some(9), Some(10), Some(11))
    );
    assert_eq!(get_le16(&p, 16), Some(64));
    assert_eq!(&p[18..24], &[8, 7, 6, 6, 0, 7], "db_page's high byte @23");
    assert_eq!(get_le64(&p, 24), Some(0x10_0000));
    assert_eq!(get_le64(&p, 32), Some(0x20_0000));
    assert_eq!((get_le32(&p, 40), get_le32(&p, 44)), (Some(8), Some(1)));
    assert_eq!(&p[48..52], &[12, 1, 21, 2]);
    assert_eq!(CreateQpParams::decode(&p), Some(q));
    reserved_refused(&p, &[52, 55], CreateQpParams::decode);
}

#[test]
fn modify_and_query_qp_params_layout() {
    let m = ModifyQpParams {
        qpn: 2,
        attr_mask: QP_ATTR_STATE | QP_ATTR_AV,
        attr_addr: 0xfeed_0000,
        attr_len: QP_ATTR_SIZE as u32,
    };
    let p = m.encode();
    assert_eq!(get_le32(&p, 4), Some(0x81));
    assert_eq!(get_le32(&p, 16), Some(128));
    assert_eq!(ModifyQpParams::decode(&p), Some(m));
    reserved_refused(&p, &[20, 55], ModifyQpParams::decode);
    let q = QueryQpParams {
        qpn: 3,
        resp_addr: 0xbeef_0000,
        resp_len: 64,
    };
    let p = q.encode();
    assert_eq!(get_le64(&p, 8), Some(0xbeef_0000));
    assert_eq!(QueryQpParams::decode(&p), Some(q));
    reserved_refused(&p, &[4, 7, 20, 55], QueryQpParams::decode);
}

#[test]
fn qp_attr_layout_round_trips_and_rejects_reserved() {
    let a = QpAttr {
        qp_state: QPS_RTR,
        cur_qp_state: QPS_INIT,
        path_mtu: MTU_4096,
        path_mig_state: 0,
        qkey: 0x1111_2222,
        rq_psn: 0x00ab_cdef,
        sq_psn: 0x0012_3456,
        dest_qp_num: 0x00fe_dcba,
        qp_access_flags: ACCESS_REMOTE_WRITE,
        pkey_index: 0x0102,
        en_sqd_async_notify: 1,
        sq_draining: 0,
        max_rd_atomic: 4,
        max_dest_rd_atomic: 8,
        min_rnr_timer: 12,
        port_num: 1,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 6,
        rate_limit: 0x3344_5566,
        ah: QpAh {
            dlid: 0x0203,
            sl: 5,
            src_path_bits: 0,
            static_rate: 3,
            ah_flags: AH_FLAG_GRH,
            port_num: 1,
            dgid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
            flow_label: 0x000f_ffff,
            sgid_index: 0,
            hop_limit: 64,
            traffic_class: 0x20,
            dmac: [0; 6],
        },
    };
    let b = a.encode();
    assert_eq!(&b[0..4], &[QPS_RTR, QPS_INIT, MTU_4096, 0]);
    assert_eq!(get_le32(&b, 8), Some(0x00ab_cdef));
    assert_eq!(get_le32(&b, 16), Some(0x00fe_dcba));
    assert_eq!(get_le16(&b, 24), Some(0x0102));
    assert_eq!(&b[28..37], &[1, 0, 4, 8, 12, 1, 14, 7, 6]);
    assert_eq!(get_le32(&b, 40), Some(0x3344_5566));
    assert_eq!(get_le16(&b, 48), Some(0x0203), "dlid @48");
    assert_eq!(&b[50..55], &[5, 0, 3, AH_FLAG_GRH, 1]);
    assert_eq!(&b[56..58], &[0xfe, 0x80], "dgid @56");
    assert_eq!(get_le32(&b, 72), Some(0x000f_ffff));
    assert_eq!(&b[76..79], &[0, 64, 0x20]);
    assert_eq!(QpAttr::decode(&b), Some(a));
    for off in [26, 27, 37, 39, 44, 47, 55, 79, 86, 95, 96, 127] {
        let mut bad = b;
        bad[off] = 1;
        assert_eq!(QpAttr::decode(&bad), None, "reserved byte {off}");
    }
}

#[test]
fn page_list_shape_and_levels() {
    assert_eq!(pt_levels_for(0), Some(1));
    assert_eq!(pt_levels_for(512), Some(1));
    assert_eq!(pt_levels_for(513), Some(2));
    assert_eq!(pt_levels_for(512 * 512), Some(2));
    assert_eq!(pt_levels_for(512 * 512 + 1), Some(3));
    assert_eq!(
        pt_levels_for(u64::from(MAX_PAGES)),
        Some(3),
        "64 GiB of 4 KiB pages: three levels"
    );
    assert_eq!(pt_levels_for(1 << 36), Some(4));
    assert_eq!(pt_levels_for((1 << 36) + 1), None);
    let ok = PageList {
        root: 0x1000,
        npages: MAX_PAGES,
        page_shift: 12,
        levels: 3,
    };
    assert!(ok.shape_ok());
    assert_eq!(ok.bytes(), 64 << 30);
    assert!(
        PageList { levels: 4, ..ok }.shape_ok(),
        "more levels than needed"
    );
    for bad in [
        PageList { levels: 2, ..ok },
        PageList { levels: 5, ..ok },
        PageList { levels: 0, ..ok },
        PageList { npages: 0, ..ok },
        PageList {
            npages: MAX_PAGES + 1,
            ..ok
        },
        PageList {
            page_shift: 13,
            ..ok
        },
        PageList { root: 0x1008, ..ok },
    ] {
        assert!(!bad.shape_ok(), "{bad:?}");
    }
}

#[test]
fn rc_state_table_matches_ib_modify_qp_is_ok() {
    let all: Vec<u8> = (QPS_RESET..=QPS_ERR).collect();
    let valid = [
        (QPS_RESET, QPS_RESET),
        (QPS_RESET, QPS_INIT),
        (QPS_INIT, QPS_RESET),
        (QPS_INIT, QPS_ERR),
        (QPS_INIT, QPS_INIT),
        (QPS_INIT, QPS_RTR),
        (QPS_RTR, QPS_RESET),
        (QPS_RTR, QPS_ERR),
        (QPS_RTR, QPS_RTS),
        (QPS_RTS, QPS_RESET),
        (QPS_RTS, QPS_ERR),
        (QPS_RTS, QPS_RTS),
        (QPS_RTS, QPS_SQD),
        (QPS_SQD, QPS_RESET),
        (QPS_SQD, QPS_ERR),
        (QPS_SQD, QPS_RTS),
        (QPS_SQD, QPS_SQD),
        (QPS_SQE, QPS_RESET),
        (QPS_SQE, QPS_ERR),
        (QPS_SQE, QPS_RTS),
        (QPS_ERR, QPS_RESET),
        (QPS_ERR, QPS_ERR),
    ];
    for &c in &all {
        for &n in &all {
            assert_eq!(
                rc_transition(c, n).is_some(),
                valid.contains(&(c, n)),
                "{c} -> {n}"
            );
        }
    }
    assert_eq!(rc_transition(7, QPS_RESET), None, "unknown state");
    let init = QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_ACCESS_FLAGS;
    assert!(rc_modify_ok(QPS_RESET, QPS_INIT, QP_ATTR_STATE | init));
    assert!(!rc_modify_ok(
        QPS_RESET,
        QPS_INIT,
        QP_ATTR_STATE | QP_ATTR_PORT
    ));
    assert!(!rc_modify_ok(
        QPS_RESET,
        QPS_INIT,
        QP_ATTR_STATE | init | QP_ATTR_QKEY
    ));
    assert!(
        !rc_modify_ok(QPS_INIT, QPS_INIT, QP_ATTR_CUR_STATE),
        "CUR_STATE only from RTR, RTS, SQD, SQE"
    );
    assert!(rc_modify_ok(QPS_RTS, QPS_RTS, QP_ATTR_CUR_STATE));
    assert!(rc_modify_ok(QPS_RTS, QPS_RTS, QP_ATTR_RATE_LIMIT));
    assert!(rc_modify_ok(QPS_SQE, QPS_RTS, QP_ATTR_STATE));
    assert!(!rc_modify_ok(
        QPS_SQE,
        QPS_RTS,
        QP_ATTR_STATE | QP_ATTR_ACCESS_FLAGS
    ));
}

#[test]
fn doorbell_page_layout() {
    assert_eq!(DB_PAGE_SIZE * DB_PAGES as usize, BAR2_SIZE);
    assert_eq!(db_value(0x1234, 0xabcd), 0x1234_abcd);
    let offs = [DB_SQ, DB_RQ, DB_CQ_ARM, DB_CQ_ARM_SOLICITED, DB_SRQ];
    for (i, o) in offs.iter().enumerate() {
        assert_eq!(*o, 4 * i, "doorbells are consecutive 32-bit words");
    }
}

/// The RC column of Linux's `qp_state_table` (`drivers/infiniband/core/verbs.c`),
/// transcribed pair by pair, against [`rc_transition`]: the same pairs, the same masks.
#[test]
fn rc_masks_are_the_kernel_tables() {
    const PKEY: u32 = QP_ATTR_PKEY_INDEX;
    const ACC: u32 = QP_ATTR_ACCESS_FLAGS;
    const ALT: u32 = QP_ATTR_ALT_PATH;
    const MIG: u32 = QP_ATTR_PATH_MIG_STATE;
    const RNR_T: u32 = QP_ATTR_MIN_RNR_TIMER;
    let expected: [(u8, u8, u32, u32); 22] = [
        (QPS_RESET, QPS_RESET, 0, 0),
        (QPS_RESET, QPS_INIT, PKEY | QP_ATTR_PORT | ACC, 0),
        (QPS_INIT, QPS_RESET, 0, 0),
        (QPS_INIT, QPS_ERR, 0, 0),
        (QPS_INIT, QPS_INIT, 0, PKEY | QP_ATTR_PORT | ACC),
        (
            QPS_INIT,
            QPS_RTR,
            QP_ATTR_AV
                | QP_ATTR_PATH_MTU
                | QP_ATTR_DEST_QPN
                | QP_ATTR_RQ_PSN
                | QP_ATTR_MAX_DEST_RD_ATOMIC
                | RNR_T,
            ALT | ACC | PKEY,
        ),
        (QPS_RTR, QPS_RESET, 0, 0),
        (QPS_RTR, QPS_ERR, 0, 0),
        (
            QPS_RTR,
            QPS_RTS,
            QP_ATTR_TIMEOUT
                | QP_ATTR_RETRY_CNT
                | QP_ATTR_RNR_RETRY
                | QP_ATTR_SQ_PSN
                | QP_ATTR_MAX_QP_RD_ATOMIC,
            QP_ATTR_CUR_STATE | ALT | ACC | RNR_T | MIG,
        ),
        (QPS_RTS, QPS_RESET, 0, 0),
        (QPS_RTS, QPS_ERR, 0, 0),
        (
            QPS_RTS,
            QPS_RTS,
            0,
            QP_ATTR_CUR_STATE | ACC | ALT | MIG | RNR_T,
        ),
        (QPS_RTS, QPS_SQD, 0, QP_ATTR_EN_SQD_ASYNC_NOTIFY),
        (QPS_SQD, QPS_RESET, 0, 0),
        (QPS_SQD, QPS_ERR, 0, 0),
        (
            QPS_SQD,
            QPS_RTS,
            0,
            QP_ATTR_CUR_STATE | ALT | ACC | RNR_T | MIG,
        ),
        (
            QPS_SQD,
            QPS_SQD,
            0,
            QP_ATTR_PORT
                | QP_ATTR_AV
                | QP_ATTR_TIMEOUT
                | QP_ATTR_RETRY_CNT
                | QP_ATTR_RNR_RETRY
                | QP_ATTR_MAX_QP_RD_ATOMIC
                | QP_ATTR_MAX_DEST_RD_ATOMIC
                | ALT
                | ACC
                | PKEY
                | RNR_T
                | MIG,
        ),
        (QPS_SQE, QPS_RESET, 0, 0),
        (QPS_SQE, QPS_ERR, 0, 0),
        (QPS_SQE, QPS_RTS, 0, 0),
        (QPS_ERR, QPS_RESET, 0, 0),
        (QPS_ERR, QPS_ERR, 0, 0),
    ];
    for cur in QPS_RESET..=QPS_ERR {
        for next in QPS_RESET..=QPS_ERR {
            let want = expected
                .iter()
                .find(|e| (e.0, e.1) == (cur, next))
                .map(|e| (e.2, e.3));
            assert_eq!(rc_transition(cur, next), want, "{cur} -> {next}");
        }
    }
    // The mask bits are IB_QP_*'s (include/rdma/ib_verbs.h).
    assert_eq!(
        [
            QP_ATTR_STATE,
            QP_ATTR_AV,
            QP_ATTR_SQ_PSN,
            QP_ATTR_DEST_QPN,
            QP_ATTR_RATE_LIMIT
        ],
        [1, 1 << 7, 1 << 16, 1 << 20, 1 << 25]
    );
}

#[test]
fn uc_masks_are_the_kernel_tables() {
    // drivers/infiniband/core/verbs.c, qp_state_table[..][..].{req,opt}_param[IB_QPT_UC].
    const PKEY: u32 = QP_ATTR_PKEY_INDEX;
    const ACC: u32 = QP_ATTR_ACCESS_FLAGS;
    const ALT: u32 = QP_ATTR_ALT_PATH;
    const MIG: u32 = QP_ATTR_PATH_MIG_STATE;
    const CUR: u32 = QP_ATTR_CUR_STATE;
    let expected: [(u8, u8, u32, u32); 22] = [
        (QPS_RESET, QPS_RESET, 0, 0),
        (QPS_RESET, QPS_INIT, PKEY | QP_ATTR_PORT | ACC, 0),
        (QPS_INIT, QPS_RESET, 0, 0),
        (QPS_INIT, QPS_ERR, 0, 0),
        (QPS_INIT, QPS_INIT, 0, PKEY | QP_ATTR_PORT | ACC),
        (
            QPS_INIT,
            QPS_RTR,
            QP_ATTR_AV | QP_ATTR_PATH_MTU | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN,
            ALT | ACC | PKEY,
        ),
        (QPS_RTR, QPS_RESET, 0, 0),
        (QPS_RTR, QPS_ERR, 0, 0),
        (QPS_RTR, QPS_RTS, QP_ATTR_SQ_PSN, CUR | ALT | ACC | MIG),
        (QPS_RTS, QPS_RESET, 0, 0),
        (QPS_RTS, QPS_ERR, 0, 0),
        (QPS_RTS, QPS_RTS, 0, CUR | ACC | ALT | MIG),
        (QPS_RTS, QPS_SQD, 0, QP_ATTR_EN_SQD_ASYNC_NOTIFY),
        (QPS_SQD, QPS_RESET, 0, 0),
        (QPS_SQD, QPS_ERR, 0, 0),
        (QPS_SQD, QPS_RTS, 0, CUR | ALT | ACC | MIG),
        (QPS_SQD, QPS_SQD, 0, QP_ATTR_AV | ALT | ACC | PKEY | MIG),
        (QPS_SQE, QPS_RESET, 0, 0),
        (QPS_SQE, QPS_ERR, 0, 0),
        (QPS_SQE, QPS_RTS, 0, CUR | ACC),
        (QPS_ERR, QPS_RESET, 0, 0),
        (QPS_ERR, QPS_ERR, 0, 0),
    ];
    for cur in QPS_RESET..=QPS_ERR {
        for next in QPS_RESET..=QPS_ERR {
            let want = expected
                .iter()
                .find(|e| (e.0, e.1) == (cur, next))
                .map(|e| (e.2, e.3));
            assert_eq!(uc_transition(cur, next), want, "{cur} -> {next}");
        }
    }
    assert_eq!(QP_TYPE_UC, 3, "IB_QPT_UC");
    // What ibv_uc_pingpong asks: no timeout, retries or depths on UC, which RC needs.
    let rtr = QP_ATTR_STATE | QP_ATTR_AV | QP_ATTR_PATH_MTU | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN;
    assert!(modify_ok(QP_TYPE_UC, QPS_INIT, QPS_RTR, rtr));
    assert!(!modify_ok(QP_TYPE_RC, QPS_INIT, QPS_RTR, rtr));
    assert!(modify_ok(
        QP_TYPE_UC,
        QPS_RTR,
        QPS_RTS,
        QP_ATTR_STATE | QP_ATTR_SQ_PSN
    ));
    let rts_rc = QP_ATTR_STATE | QP_ATTR_SQ_PSN | QP_ATTR_TIMEOUT;
    assert!(
        !modify_ok(QP_TYPE_UC, QPS_RTR, QPS_RTS, rts_rc),
        "a timeout on UC"
    );
    assert!(!modify_ok(
        QP_TYPE_UC,
        QPS_INIT,
        QPS_RTR,
        rtr | QP_ATTR_MAX_DEST_RD_ATOMIC
    ));
    assert!(!modify_ok(QP_TYPE_UD, QPS_RESET, QPS_INIT, QP_ATTR_STATE));
}

#[test]
fn send_wqe_round_trips_and_refuses_reserved_bytes() {
    let w = SendWqe {
        opcode: WR_RDMA_WRITE_IMM,
        flags: WQE_FLAG_SIGNALED | WQE_FLAG_INLINE,
        num_sge: 0,
        imm: 0x0102_0304,
        inline_len: 17,
        remote_addr: 0x1122_3344_5566_7788,
        rkey: 0x0000_0abc,
    };
    let mut b = [0xffu8; 64];
    assert!(w.encode_into(&mut b));
    assert_eq!(SendWqe::decode(&b), Some(w));
    assert_eq!(
        &b[32..],
        &[0xffu8; 32][..],
        "encode leaves the SGEs and inline data alone"
    );
    for reserved in [3usize, 12, 13, 14, 15, 28, 29, 30, 31] {
        let mut bad = b;
        bad[reserved] = 1;
        assert_eq!(SendWqe::decode(&bad), None, "reserved byte {reserved}");
    }
    assert!(!w.encode_into(&mut [0u8; 31]));
    assert_eq!(SendWqe::decode(&b[..31]), None);
    let sge = Sge {
        addr: 0xdead_beef_0000,
        length: 4096,
        lkey: 0x1_02,
    };
    assert!(sge.encode_into(&mut b, SendWqe::sge_offset(1)));
    assert_eq!(Sge::decode_from(&b, SendWqe::sge_offset(1)), Some(sge));
    assert!(
        !sge.encode_into(&mut b, SendWqe::sge_offset(2)),
        "past the end"
    );
}

#[test]
fn atomic_segment_sits_between_the_remote_address_and_the_sges() {
    assert_eq!(
        (WR_ATOMIC_CMP_AND_SWP, WR_ATOMIC_FETCH_AND_ADD),
        (5, 6),
        "enum ibv_wr_opcode's values"
    );
    assert_eq!(
        (WC_COMP_SWAP, WC_FETCH_ADD),
        (3, 4),
        "enum ibv_wc_opcode's values"
    );
    assert!(is_atomic(5) && is_atomic(6) && !is_atomic(WR_RDMA_READ) && !is_atomic(7));
    let w = SendWqe {
        opcode: WR_ATOMIC_CMP_AND_SWP,
        flags: WQE_FLAG_SIGNALED,
        num_sge: 1,
        remote_addr: 0x7000_0008,
        rkey: 0x1_01,
        ..Default::default()
    };
    let a = AtomicSeg {
        compare_add: 0x0102_0304_0506_0708,
        swap: 0x1112_1314_1516_1718,
    };
    let sge = Sge {
        addr: 0x4000,
        length: ATOMIC_SIZE,
        lkey: 0x2_02,
    };
    let mut b = [0u8; 64];
    assert!(w.encode_into(&mut b) && a.encode_into(&mut b));
    assert!(sge.encode_into(&mut b, SendWqe::atomic_sge_offset(0)));
    assert_eq!(
        &b[32..40],
        &[8, 7, 6, 5, 4, 3, 2, 1],
        "compare_add LE at 32"
    );
    assert_eq!(
        &b[40..48],
        &[0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11]
    );
    assert_eq!(SendWqe::atomic_sge_offset(0), 48);
    assert_eq!(SendWqe::decode(&b), Some(w));
    assert_eq!(AtomicSeg::decode_from(&b), Some(a));
    assert_eq!(Sge::decode_from(&b, 48), Some(sge));
    assert!(!a.encode_into(&mut [0u8; 47]));
    assert_eq!(AtomicSeg::decode_from(&b[..47]), None);
}

#[test]
fn recv_wqe_and_cqe_round_trip() {
    let mut b = [0u8; 64];
    assert!(RecvWqe { num_sge: 3 }.encode_into(&mut b));
    assert_eq!(RecvWqe::decode(&b), Some(RecvWqe { num_sge: 3 }));
    b[15] = 1;
    assert_eq!(RecvWqe::decode(&b), None);
    let c = Cqe {
        wqe_index: 0xfffe,
        status: WC_REM_ACCESS_ERR,
        opcode: WC_RECV_RDMA_IMM,
        qpn: 77,
        byte_len: 2 << 20,
        imm: 0xa1b2_c3d4,
        flags: CQE_FLAG_RECV | CQE_FLAG_IMM,
        vendor_err: 9,
        src_qp: 0x00ff_ffff,
        slid: 0xbffe,
    };
    let e = c.encode();
    assert_eq!(e.len(), CQE_OWNER_OFFSET);
    assert_eq!(Cqe::decode(&e), Some(c));
    assert_eq!(e[2], WC_REM_ACCESS_ERR);
    assert_eq!(e[3], WC_RECV_RDMA_IMM);
    assert_eq!(e[18..20], [0xfe, 0xbf], "slid @18, little-endian");
}

#[test]
fn ud_segment_layout() {
    let seg = UdSeg {
        remote_qpn: 0x12_3456,
        remote_qkey: UD_QKEY_OWN | 0x11,
        av: QpAh {
            dlid: 0x0102,
            sl: 3,
            port_num: 1,
            ah_flags: AH_FLAG_GRH,
            dgid: [7; 16],
            flow_label: 0xabcde,
            sgid_index: 0,
            hop_limit: 64,
            traffic_class: 5,
            ..Default::default()
        },
    };
    let mut b = vec![0xeeu8; SQ_WQE_UD_DATA as usize];
    assert!(seg.encode_into(&mut b));
    assert_eq!(
        b[..SQ_WQE_UD_OFFSET as usize],
        [0xee; 32],
        "control segments untouched"
    );
    assert_eq!(b[32..36], [0x56, 0x34, 0x12, 0]);
    assert_eq!(b[36..40], (UD_QKEY_OWN | 0x11).to_le_bytes());
    assert_eq!(b[40..48], [0; 8]);
    assert_eq!(b[48..50], [0x02, 0x01], "the AV's dlid @16 of the segment");
    assert_eq!(UdSeg::decode_from(&b), Some(seg));
    assert_eq!(sq_wqe_data(QP_TYPE_UD), 96);
    assert_eq!(sq_wqe_data(QP_TYPE_RC), SQ_WQE_BASE);
    assert!(!seg.encode_into(&mut b[..95]), "short");
    assert_eq!(UdSeg::decode_from(&b[..95]), None);
    let mut bad = b.clone();
    bad[44] = 1;
    assert_eq!(UdSeg::decode_from(&bad), None, "reserved bytes");
    let mut bad = b.clone();
    bad[35] = 1;
    assert_eq!(UdSeg::decode_from(&bad), None, "QPN above 24 bits");
}

#[test]
fn ud_state_machine_is_ib_modify_qp_is_ok() {
    let init = QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_QKEY;
    assert!(modify_ok(
        QP_TYPE_UD,
        QPS_RESET,
        QPS_INIT,
        QP_ATTR_STATE | init
    ));
    assert!(!modify_ok(
        QP_TYPE_UD,
        QPS_RESET,
        QPS_INIT,
        QP_ATTR_STATE | QP_ATTR_PORT
    ));
    assert!(modify_ok(QP_TYPE_UD, QPS_INIT, QPS_RTR, QP_ATTR_STATE));
    assert!(!modify_ok(
        QP_TYPE_UD,
        QPS_INIT,
        QPS_RTR,
        QP_ATTR_STATE | QP_ATTR_AV
    ));
    assert!(!modify_ok(QP_TYPE_UD, QPS_RTR, QPS_RTS, QP_ATTR_STATE));
    assert!(modify_ok(
        QP_TYPE_UD,
        QPS_RTR,
        QPS_RTS,
        QP_ATTR_STATE | QP_ATTR_SQ_PSN
    ));
    assert!(modify_ok(QP_TYPE_UD, QPS_RTS, QPS_RTS, QP_ATTR_QKEY));
    assert!(!modify_ok(QP_TYPE_UD, QPS_RTS, QPS_RTS, QP_ATTR_DEST_QPN));
}

#[test]
fn cqe_phase_is_one_on_the_first_pass_and_flips_each_wrap() {
    assert_eq!(cqe_phase(0, 2), 1);
    assert_eq!(cqe_phase(3, 2), 1);
    assert_eq!(cqe_phase(4, 2), 0);
    assert_eq!(cqe_phase(8, 2), 1);
    // Free-running 16-bit indices stay consistent across their own wrap (depth <= 2^15).
    assert_eq!(cqe_phase(0xffff, 15), 0);
    assert_eq!(cqe_phase(0x1_0000 & 0xffff, 15), 1);
}

#[test]
fn srq_params_layout() {
    let c = CreateSrqParams {
        db_page: 0x0605,
        max_sge: 3,
        wq: WorkQueue {
            log_depth: 13,
            log_wqe_size: 7,
            ring: PageList {
                root: 0x1234_5000,
                npages: 256,
                page_shift: 12,
                levels: 1,
            },
        },
        pdn: 0x0102_0304,
    };
    let p = c.encode();
    assert_eq!(&p[0..4], &[5, 3, 13, 7]);
    assert_eq!(get_le32(&p, 4), Some(0x0102_0304));
    assert_eq!(get_le64(&p, 8), Some(0x1234_5000));
    assert_eq!(get_le32(&p, 16), Some(256));
    assert_eq!(&p[20..23], &[12, 1, 6], "db_page's high byte @22");
    assert_eq!(CreateSrqParams::decode(&p), Some(c));
    reserved_refused(&p, &[23, 40, 55], CreateSrqParams::decode);

    let m = ModifySrqParams {
        srqn: 9,
        attr_mask: SRQ_ATTR_LIMIT,
        srq_limit: 77,
        ..Default::default()
    };
    let p = m.encode();
    assert_eq!(
        (get_le32(&p, 0), get_le32(&p, 4), get_le32(&p, 8)),
        (Some(9), Some(2), Some(77))
    );
    assert!(p[12..].iter().all(|&b| b == 0), "no ring without a resize");
    assert_eq!(ModifySrqParams::decode(&p), Some(m));
    reserved_refused(&p, &[15, 28, 55], ModifySrqParams::decode);
    // A resize (1.7): the new ring after the limit.
    let m = ModifySrqParams {
        srqn: 0x0304,
        attr_mask: SRQ_ATTR_MAX_WR | SRQ_ATTR_LIMIT,
        srq_limit: 5,
        log_depth: 11,
        ring: PageList {
            root: 0x0001_2345_6000,
            npages: 32,
            page_shift: 12,
            levels: 1,
        },
    };
    let p = m.encode();
    assert_eq!(get_le32(&p, 4), Some(3));
    assert_eq!(&p[12..16], &[11, 12, 1, 0]);
    assert_eq!(get_le64(&p, 16), Some(0x0001_2345_6000));
    assert_eq!(get_le32(&p, 24), Some(32));
    assert_eq!(ModifySrqParams::decode(&p), Some(m));
    reserved_refused(&p, &[15, 28, 55], ModifySrqParams::decode);

    let q = QuerySrqParams {
        srqn: 4,
        resp_addr: 0xabc0,
        resp_len: 16,
    };
    let p = q.encode();
    assert_eq!(get_le64(&p, 8), Some(0xabc0));
    assert_eq!(get_le32(&p, 16), Some(16));
    assert_eq!(QuerySrqParams::decode(&p), Some(q));
    reserved_refused(&p, &[4, 7, 20, 55], QuerySrqParams::decode);

    let a = SrqAttrs {
        max_wr: 8191,
        max_sge: 1,
        srq_limit: 10,
        wqe_count: 3,
    };
    let b = a.encode();
    assert_eq!(get_le32(&b, 12), Some(3));
    assert_eq!(SrqAttrs::decode(&b), a);
    assert_eq!(
        (
            CMD_CREATE_SRQ,
            CMD_MODIFY_SRQ,
            CMD_QUERY_SRQ,
            CMD_DESTROY_SRQ
        ),
        (0x0d, 0x0e, 0x0f, 0x10)
    );
    assert_eq!(
        (EVENT_SRQ_LIMIT_REACHED, EVENT_QP_LAST_WQE_REACHED, DB_SRQ),
        (11, 12, 0x010)
    );
}

#[test]
fn srq_wqe_links_and_qp_srq_flag() {
    let w = SrqWqe {
        num_sge: 2,
        next: 0x1234,
    };
    let mut b = [0xffu8; 64];
    assert!(w.encode_into(&mut b));
    assert_eq!(&b[0..4], &[2, 0, 0x34, 0x12]);
    assert!(b[4..16].iter().all(|&x| x == 0));
    assert_eq!(SrqWqe::decode(&b), Some(w));
    assert_eq!(SrqWqe::next_of(&b), Some(0x1234));
    for off in [1, 4, 15] {
        let mut bad = b;
        bad[off] = 1;
        assert_eq!(SrqWqe::decode(&bad), None, "reserved byte {off}");
        assert_eq!(
            SrqWqe::next_of(&bad),
            Some(0x1234),
            "next is still where it is"
        );
    }
    assert_eq!(SrqWqe::decode(&b[..15]), None);

    let mut q = CreateQpParams {
        qp_type: QP_TYPE_RC,
        flags: QP_FLAG_SRQ,
        ..Default::default()
    };
    q.rq.ring.root = 7;
    assert_eq!(q.srqn(), Some(7));
    let p = q.encode();
    assert_eq!(get_le64(&p, 32), Some(7), "the SRQN in rq_root");
    assert_eq!(CreateQpParams::decode(&p).and_then(|d| d.srqn()), Some(7));
    let mut high = q;
    high.rq.ring.root = (1 << 32) | 7;
    assert_eq!(high.srqn(), None);
    let mut ring = q;
    ring.rq.log_depth = 1;
    assert_eq!(ring.srqn(), None);
    let mut sge = q;
    sge.max_recv_sge = 1;
    assert_eq!(sge.srqn(), None);
    let mut no_flag = q;
    no_flag.flags = 0;
    assert_eq!(no_flag.srqn(), None);
}

#[test]
fn set_gid_params_and_ethernet_addresses() {
    let mut gid = [0u8; 16];
    gid[10..].copy_from_slice(&[0xff, 0xff, 10, 78, 0, 1]);
    let p = SetGidParams {
        port: 1,
        index: 3,
        gid,
        gid_type: GID_TYPE_ROCE_V2,
    };
    let e = p.encode();
    assert_eq!(get_le32(&e, 4), Some(3));
    assert_eq!(&e[8..24], &gid);
    assert_eq!(e[24], 1);
    assert_eq!(SetGidParams::decode(&e), Some(p));
    assert_eq!(gid_ipv4(&gid), Some([10, 78, 0, 1]));
    assert_eq!(
        gid_ipv4(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4]),
        None
    );
    let mut bad = e;
    bad[25] = 1;
    assert_eq!(SetGidParams::decode(&bad), None, "reserved byte");
    bad = e;
    bad[24] = 2;
    assert_eq!(SetGidParams::decode(&bad), None, "unknown type");
    bad = e;
    bad[24] = GID_TYPE_NONE;
    assert_eq!(
        SetGidParams::decode(&bad),
        None,
        "an empty entry with a GID"
    );
    bad[8..24].fill(0);
    assert!(SetGidParams::decode(&bad).is_some(), "clearing");

    let av = QpAh {
        port_num: 1,
        ah_flags: AH_FLAG_GRH,
        dgid: gid,
        sgid_index: 3,
        hop_limit: 64,
        dmac: [2, 0, 0, 0, 0, 1],
        ..Default::default()
    };
    assert!(av.valid_ethernet(16) && av.valid_on(LINK_LAYER_ETHERNET, 16));
    assert!(!av.valid(), "an InfiniBand port takes no MAC and no LID 0");
    assert!(!av.valid_ethernet(3), "source index past the table");
    for bad in [
        QpAh { dlid: 1, ..av },
        QpAh { ah_flags: 0, ..av },
        QpAh { sl: 8, ..av },
        QpAh { port_num: 2, ..av },
        QpAh {
            flow_label: 1 << 20,
            ..av
        },
        QpAh { dmac: [0; 6], ..av },
        QpAh {
            dmac: [1, 0, 0x5e, 0, 0, 1],
            ..av
        },
    ] {
        assert!(!bad.valid_ethernet(16), "{bad:?}");
    }
    let mut b = [0u8; QP_AH_SIZE];
    av.encode_into(&mut b);
    assert_eq!(&b[32..38], &av.dmac, "dmac @32");
    assert_eq!(QpAh::decode_from(&b), Some(av));
    b[38] = 1;
    assert_eq!(QpAh::decode_from(&b), None, "reserved @38");
}

#[test]
fn port_counters_layout() {
    assert_eq!(COUNTERS_SIZE, 136);
    assert_eq!(COUNTERS.len(), NUM_COUNTERS);
    let names: Vec<_> = COUNTERS.iter().map(|c| c.to_str().unwrap()).collect();
    assert_eq!(names[CNT_SENT_PKTS], "sent_pkts");
    assert_eq!(names[CNT_RETRY_EXCEEDED_ERR], "retry_exceeded_err");
    assert_eq!(names[CNT_BAD_FRAMES], "bad_frames");
    let mut c = PortCounters::default();
    for i in 0..NUM_COUNTERS {
        c.add(i, 1000 + i as u64);
    }
    c.add(NUM_COUNTERS, 1);
    let b = c.encode();
    assert_eq!(get_le64(&b, CNT_RCVD_PKTS * 8), Some(1001));
    assert_eq!(PortCounters::decode(&b), c);
    let mut w = PortCounters::default();
    w.add(CNT_ATOMICS, u64::MAX);
    w.add(CNT_ATOMICS, 2);
    assert_eq!(w.get(CNT_ATOMICS), 1, "64-bit counters wrap");
    assert_eq!(w.get(NUM_COUNTERS), 0);
}

#[test]
fn flush_segment_round_trips_and_rejects_what_it_does_not_know() {
    let seg = FlushSeg {
        length: 0x1234_5678,
        placement: FLUSH_GLOBAL | FLUSH_PERSISTENT,
        level: FLUSH_MR,
    };
    let mut b = [0xffu8; 64];
    assert!(seg.encode_into(&mut b));
    assert_eq!(
        b[32..48],
        [0x78, 0x56, 0x34, 0x12, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(FlushSeg::decode_from(&b), Some(seg));
    for (at, v) in [(36, 0), (36, 4), (37, 2), (38, 1), (47, 1)] {
        let mut c = b;
        c[at] = v;
        assert_eq!(FlushSeg::decode_from(&c), None, "byte {at} = {v}");
    }
    assert!(!seg.encode_into(&mut [0u8; 47]));
    assert!(is_rd_atomic(WR_FLUSH) && is_rd_atomic(WR_ATOMIC_WRITE) && is_rd_atomic(WR_RDMA_READ));
    assert!(!is_atomic(WR_ATOMIC_WRITE) && !is_rd_atomic(WR_RDMA_WRITE));
}

#[test]
fn device_limits_are_clamped_to_the_interface() {
    let sane = DeviceAttrs {
        max_qp: 16384,
        max_qp_wr: 32768,
        max_cq: 3072,
        max_cqe: 32768,
        max_mr: 65536,
        max_pd: 16384,
        max_sge: 16,
        num_ports: 1,
        max_srq: 16384,
        max_srq_wr: 32767,
        max_srq_sge: 16,
        max_mw: 65536,
        ..DeviceAttrs::default()
    };
    let (a, clamped) = sane.clamped();
    assert_eq!(a, sane, "a sane NIC's figures are used as they are");
    assert!(clamped.iter().all(Option::is_none));
    // A hostile NIC: every limit u32::MAX.
    let hostile = DeviceAttrs {
        max_qp: u32::MAX,
        max_qp_wr: u32::MAX,
        max_cq: u32::MAX,
        max_cqe: u32::MAX,
        max_mr: u32::MAX,
        max_pd: u32::MAX,
        max_sge: u32::MAX,
        num_ports: u32::MAX,
        max_srq: u32::MAX,
        max_srq_wr: u32::MAX,
        max_srq_sge: u32::MAX,
        max_mw: u32::MAX,
        ..DeviceAttrs::default()
    };
    let (a, clamped) = hostile.clamped();
    assert_eq!(
        (
            a.max_qp,
            a.max_qp_wr,
            a.max_cq,
            a.max_cqe,
            a.max_mr,
            a.max_pd
        ),
        (65534, 32768, MAX_CQS, 32768, 1 << 24, 1 << 24)
    );
    assert_eq!(
        (
            a.max_sge,
            a.num_ports,
            a.max_srq,
            a.max_srq_wr,
            a.max_srq_sge,
            a.max_mw
        ),
        (63, 1, 65536, 32767, 63, 1 << 24)
    );
    assert_eq!(MAX_CQS, 3072);
    let names: Vec<_> = clamped.iter().flatten().map(|c| (c.name, c.from)).collect();
    assert_eq!(names.len(), CLAMPED_LIMITS, "{names:?}");
    assert!(names.iter().all(|&(_, from)| from == u32::MAX));
    // The size arithmetic of the largest WQE fits: header plus every SGE.
    assert!(RQ_WQE_BASE + WQE_SGE_SIZE * a.max_sge <= 1 << WQE_LOG_SIZE_MAX);
    // One limit over: only it is named.
    let one = DeviceAttrs {
        max_cq: 16384,
        ..sane
    };
    let (a, clamped) = one.clamped();
    assert_eq!(a.max_cq, 3072);
    let c: Vec<_> = clamped.iter().flatten().collect();
    assert_eq!(
        c,
        [&Clamped {
            name: "max_cq",
            from: 16384,
            to: 3072
        }]
    );
}
