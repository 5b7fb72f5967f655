# Hand-written instructions of every encoding, with operand forms compilers rarely emit.
# Assembled by tests/llvm_objdump.rs with llvm-mc-19 -arch=amdgcn -mcpu=gfx1100; its
# disassembly by llvm-objdump-19 must match the decoder.
	s_mov_b32 s0, s1
	s_mov_b64 s[0:1], 0xffffffff
	s_mov_b64 s[0:1], -1
	s_mov_b64 s[0:1], 0x12345678
	s_mov_b64 s[2:3], 1.0
	s_mov_b64 s[2:3], 0.5
	s_mov_b32 s0, 0.15915494
	s_mov_b32 s0, 0x3e22f983
	s_brev_b32 s0, s1
	s_getpc_b64 s[0:1]
	s_setpc_b64 s[0:1]
	s_sendmsg_rtn_b32 s0, sendmsg(MSG_RTN_GET_DOORBELL)
	s_and_saveexec_b32 s0, s1
	s_add_u32 s0, s1, 0x64
	s_add_i32 s0, s1, -17
	s_lshl_b64 s[0:1], s[2:3], 4
	s_mul_i32 s0, s1, s2
	s_cselect_b64 s[0:1], s[2:3], 0
	s_pack_ll_b32_b16 s0, s1, s2
	s_movk_i32 s0, 0x1234
	s_movk_i32 s0, 0xffff
	s_addk_i32 s0, 0x10
	s_cmpk_lg_u32 s0, 0x10
	s_getreg_b32 s0, hwreg(HW_REG_MODE)
	s_getreg_b32 s0, hwreg(HW_REG_HW_ID1, 0, 10)
	s_getreg_b32 s0, hwreg(HW_REG_SHADER_CYCLES, 0, 20)
	s_setreg_b32 hwreg(HW_REG_MODE, 0, 4), s0
	s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 4), 0x3
	s_setreg_imm32_b32 hwreg(HW_REG_MODE), 0x12345
	s_waitcnt_vscnt null, 0x0
	s_waitcnt_vmcnt null, 0x3
	s_waitcnt_lgkmcnt null, 0x0
	s_version 0x6
	s_call_b64 s[0:1], 16
	s_cmp_eq_u32 s0, s1
	s_cmp_lg_u64 s[0:1], 0
	s_bitcmp1_b32 s0, 31
	s_nop 7
	s_endpgm
	s_endpgm_saved
	s_barrier
	s_waitcnt vmcnt(0) lgkmcnt(0)
	s_waitcnt vmcnt(1) expcnt(2) lgkmcnt(3)
	s_waitcnt expcnt(0)
	s_waitcnt 0
	s_waitcnt vmcnt(63) expcnt(7) lgkmcnt(63)
	s_waitcnt_depctr 0xfff
	s_waitcnt_depctr depctr_va_vdst(0)
	s_waitcnt_depctr depctr_sa_sdst(0)
	s_waitcnt_depctr depctr_vm_vsrc(0)
	s_waitcnt_depctr 0xff
	s_delay_alu instid0(VALU_DEP_1)
	s_delay_alu instid0(SALU_CYCLE_1)
	s_delay_alu instid0(TRANS32_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_2)
	s_delay_alu instid0(VALU_DEP_4) | instskip(SKIP_4) | instid1(SALU_CYCLE_3)
	s_delay_alu 0
	s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)
	s_sendmsg sendmsg(MSG_INTERRUPT)
	s_sendmsg sendmsg(MSG_GS_ALLOC_REQ)
	s_sendmsg 0x22
	s_sendmsg 0x77
	s_sendmsghalt sendmsg(MSG_INTERRUPT)
	s_clause 0x3
	s_sleep 2
	s_setprio 3
	s_trap 2
	s_icache_inv
	s_code_end
	s_inst_prefetch 0x1
	s_setkill 0
	s_ttracedata
	s_round_mode 0x1
	s_denorm_mode 0xf
	s_load_b32 s0, s[0:1], 0x0
	s_load_b64 s[2:3], s[0:1], 0x18 glc
	s_load_b128 s[4:7], s[0:1], -0x10
	s_load_b512 s[8:23], s[2:3], s4 offset:0x10
	s_load_b32 s0, s[0:1], s4
	s_buffer_load_b32 s0, s[4:7], 0x4 glc dlc
	s_gl1_inv
	s_dcache_inv
	v_nop
	v_mov_b32_e32 v0, v1
	v_mov_b32_e32 v0, 0x40490fdb
	v_mov_b32_e32 v0, 1.0
	v_mov_b32_e32 v0, -4.0
	v_mov_b32_e32 v0, 0.15915494
	v_mov_b32_e32 v0, 0x3f800001
	v_mov_b32_e32 v255, s105
	v_mov_b32_e32 v0, exec_hi
	v_mov_b32_e32 v0, m0
	v_mov_b32_e32 v0, src_scc
	v_mov_b32_e32 v0, src_shared_base
	v_readfirstlane_b32 s0, v1
	v_cvt_f64_f32_e32 v[0:1], v2
	v_cvt_f32_f64_e32 v0, v[2:3]
	v_rcp_f64_e32 v[0:1], v[2:3]
	v_rcp_f64_e32 v[0:1], 1.0
	v_rcp_f64_e32 v[0:1], 0x40080000
	v_fract_f64_e32 v[0:1], s[2:3]
	v_cvt_f16_f32_e32 v0, v1
	v_cvt_f32_f16_e32 v0, v1
	v_sqrt_f16_e32 v0, 0x3c01
	v_sqrt_f16_e32 v0, 1.0
	v_mov_b16_e32 v0.l, v1.h
	v_mov_b32_dpp v0, v1 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf
	v_mov_b32_dpp v0, v1 row_shl:1 row_mask:0xf bank_mask:0xf bound_ctrl:1
	v_mov_b32_dpp v0, v1 row_shr:15 row_mask:0x3 bank_mask:0x5 fi:1
	v_mov_b32_dpp v0, v1 row_share:2 row_mask:0xf bank_mask:0xf
	v_mov_b32_dpp v0, v1 row_xmask:5 row_mask:0xf bank_mask:0xf
	v_mov_b32_dpp v0, v1 row_mirror row_mask:0xf bank_mask:0xf
	v_mov_b32_dpp v0, v1 row_half_mirror row_mask:0xf bank_mask:0xf
	v_mov_b32_dpp v0, v1 row_ror:4 row_mask:0xf bank_mask:0xf
	v_mov_b32_dpp v0, v1 dpp8:[7,6,5,4,3,2,1,0]
	v_mov_b32_dpp v0, v1 dpp8:[7,6,5,4,3,2,1,0] fi:1
	v_add_f32_dpp v0, -v1, |v2| quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf
	v_add_f32_e32 v1, v2, v3
	v_add_f32_e32 v1, 0x42280000, v3
	v_add_f32_e32 v1, s2, v3
	v_add_f32_e32 v1, 0.5, v3
	v_add_nc_u32_e32 v1, 64, v3
	v_add_nc_u32_e32 v1, 0x41, v3
	v_add_nc_u32_e32 v1, -16, v3
	v_add_nc_u32_e32 v1, 0xffffffef, v3
	v_add_nc_u32_e32 v1, 1.0, v3
	v_add_co_ci_u32_e32 v1, vcc_lo, v2, v3, vcc_lo
	v_cndmask_b32_e32 v1, v2, v3, vcc_lo
	v_fmaak_f32 v1, v2, v3, 0x40490fdb
	v_fmamk_f32 v1, v2, 0x40490fdb, v3
	v_fmac_f32_e32 v1, v2, v3
	v_fmac_f32_dpp v1, v2, v3 row_shr:1 row_mask:0xf bank_mask:0xf
	v_add_f16_e32 v1, v2, v3
	v_add_f16_e32 v1, 0x3c01, v3
	v_add_f16_e32 v1, 1.0, v3
	v_pk_fmac_f16 v1, v2, v3
	v_ldexp_f16_e32 v1, v2, v3
	v_cmp_eq_u32_e32 vcc_lo, v1, v2
	v_cmp_lt_f32_e32 vcc_lo, 0x40490fdb, v2
	v_cmp_gt_u64_e32 vcc_lo, s[0:1], v[2:3]
	v_cmp_class_f32_e32 vcc_lo, v1, v2
	v_cmp_class_f64_e32 vcc_lo, v[1:2], v2
	v_cmpx_eq_u32_e32 v1, v2
	v_cmpx_gt_i32_e32 0, v2
	v_cmp_eq_f16_e32 vcc_lo, v1, v2
	v_cmp_lt_f32_dpp vcc_lo, v1, v2 quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf
	v_cmp_eq_u32_e64 s0, v1, v2
	v_cmp_eq_u32_e64 vcc_lo, v1, 3
	v_cmp_lt_f32_e64 s0, -v1, |v2|
	v_cmp_class_f32_e64 s0, v1, 3
	v_cmpx_eq_u32_e64 v1, s2
	v_cmpx_lt_f32_e64 -v1, v2
	v_cmp_ne_u64_e64 s0, v[1:2], 0
	v_add_f32_e64 v1, v2, v3
	v_add_f32_e64 v1, -v2, |v3| clamp
	v_add_f32_e64 v1, v2, v3 mul:2
	v_add_f32_e64 v1, v2, v3 mul:4
	v_add_f32_e64 v1, v2, v3 div:2
	v_add_f32_e64 v1, s2, 0x42280000
	v_mul_f32_e64 v3, |v7|, -v10
	v_fma_f32 v2, -v3, v6, 1.0
	v_fma_f32 v2, v3, v6, 0x3f800001
	v_fma_f64 v[0:1], v[2:3], v[4:5], v[6:7]
	v_fma_f64 v[0:1], v[2:3], 1.0, -v[6:7]
	v_add_f64 v[0:1], v[2:3], 0x40080000
	v_add_f64 v[0:1], s[2:3], 0x3ff00001
	v_mul_f64 v[0:1], |v[2:3]|, -s[4:5]
	v_lshlrev_b64 v[2:3], 2, v[1:2]
	v_lshlrev_b64 v[2:3], 2, 0x12345678
	v_ashrrev_i64 v[2:3], 31, s[0:1]
	v_mad_u64_u32 v[1:2], null, s15, s2, v[0:1]
	v_mad_u64_u32 v[1:2], s0, s15, 0x12345, v[0:1]
	v_mad_i64_i32 v[1:2], vcc_lo, v3, v4, 0
	v_div_scale_f32 v3, vcc_lo, v7, v7, v10
	v_div_scale_f64 v[3:4], s0, v[5:6], v[5:6], 1.0
	v_add_co_u32 v1, vcc_lo, v2, v3
	v_add_co_u32 v1, s0, v2, 0x100
	v_add_co_ci_u32_e64 v1, s0, v2, v3, s0
	v_sub_co_ci_u32_e64 v1, null, 0, v3, vcc_lo
	v_subrev_co_ci_u32_e64 v1, s0, v2, v3, s1 clamp
	v_sub_co_u32 v1, s0, v2, v3 clamp
	v_cndmask_b32_e64 v1, v2, v3, s0
	v_cndmask_b32_e64 v1, -v2, |v3|, s0
	v_cndmask_b32_e64 v1, 0, 1, vcc_lo
	v_readlane_b32 s0, v1, 3
	v_readlane_b32 s0, v1, s2
	v_writelane_b32 v1, s0, 3
	v_bfe_u32 v1, v2, 8, 8
	v_bfe_u32 v1, v2, 0x80, 8
	v_perm_b32 v1, v2, v3, 0x5040100
	v_lshl_add_u32 v1, v2, 3, v4
	v_med3_f32 v1, v2, v3, v4 clamp
	v_max_f16_e64 v1, v2, v3
	v_cvt_f16_f32_e64 v1, -v2 clamp
	v_fma_f16 v1, v2, v3, v4 op_sel:[1,1,1,1]
	v_fma_f16 v1, v2, 0x3c01, v4
	v_mad_u16 v1, v2, v3, v4 op_sel:[1,0,1,0]
	v_pack_b32_f16 v1, v2, v3 op_sel:[1,1,0]
	v_add_nc_u16 v1, v2, v3 op_sel:[1,0,1]
	v_add_nc_u16 v1, v2, 0x1234
	v_mov_b32_e64 v1, v2
	v_mov_b32_e64 v1, s2
	v_cvt_f32_i32_e64 v1, v2 clamp
	v_sqrt_f32_e64 v1, v2 mul:2
	v_not_b32_e64 v1, 0x1234
	v_readfirstlane_b32 s0, v1
	v_add_f32_e64_dpp v1, v2, v3 quad_perm:[3,2,1,0] row_mask:0xf bank_mask:0xf
	v_fma_f32_e64_dpp v1, v2, v3, v4 row_shr:1 row_mask:0xf bank_mask:0xf
	v_add_f32_e64_dpp v1, v2, v3 dpp8:[0,1,2,3,4,5,6,7]
	v_pk_add_f16 v1, v2, v3
	v_pk_add_f16 v1, v2, v3 op_sel:[1,1] op_sel_hi:[0,0]
	v_pk_add_f16 v1, v2, v3 neg_lo:[1,0] neg_hi:[0,1]
	v_pk_fma_f16 v1, v2, v3, v4 op_sel_hi:[0,1,1] clamp
	v_pk_mul_lo_u16 v1, v2, 4
	v_pk_add_u16 v1, v2, 0x12345678
	v_pk_add_f16 v1, v2, 1.0
	v_fma_mix_f32 v1, v2, v3, v4
	v_fma_mix_f32 v1, -v2, |v3|, v4 op_sel_hi:[1,1,1]
	v_fma_mixlo_f16 v1, v2, v3, v4 op_sel:[1,0,0] clamp
	v_fma_mixhi_f16 v1, v2, v3, v4
	v_dot2_f32_f16 v1, v2, v3, v4
	v_dot2_f32_f16 v1, v2, v3, v4 neg_lo:[1,1,0] neg_hi:[1,1,0]
	v_dot4_i32_iu8 v1, v2, v3, v4 neg_lo:[1,0,0]
	v_dot4_u32_u8 v1, v2, v3, v4
	v_dot4_u32_u8 v1, v2, v3, v4 clamp
	v_dot8_u32_u4 v1, v2, v3, v4
	v_dot2_f16_f16 v1, v2, v3, v4
	v_dual_mov_b32 v0, v1 :: v_dual_mov_b32 v1, v2
	v_dual_add_f32 v0, v1, v2 :: v_dual_mul_f32 v3, v4, v5
	v_dual_fmaak_f32 v0, v1, v2, 0x40490fdb :: v_dual_mov_b32 v1, 0x40490fdb
	v_dual_fmamk_f32 v0, v1, 0x40490fdb, v2 :: v_dual_add_f32 v1, 0x40490fdb, v3
	v_dual_cndmask_b32 v0, v1, v2 :: v_dual_cndmask_b32 v1, s2, v3
	v_dual_mov_b32 v0, 1.0 :: v_dual_and_b32 v1, 7, v3
	v_dual_fmac_f32 v0, v1, v2 :: v_dual_sub_f32 v1, s1, v3
	v_dual_max_f32 v0, v1, v2 :: v_dual_min_f32 v1, v2, v3
	v_dual_dot2acc_f32_f16 v0, v1, v2 :: v_dual_mov_b32 v1, v3
	ds_load_b32 v0, v1
	ds_load_b32 v0, v1 offset:65535
	ds_load_b64 v[0:1], v1 offset:8
	ds_load_b128 v[0:3], v1
	ds_load_2addr_b32 v[0:1], v2 offset0:1 offset1:2
	ds_load_2addr_stride64_b64 v[0:3], v2 offset1:255
	ds_store_b32 v1, v2 offset:16
	ds_store_b64 v1, v[2:3]
	ds_store_2addr_b32 v1, v2, v3 offset0:4 offset1:8
	ds_store_b8 v1, v2
	ds_add_u32 v1, v2
	ds_add_rtn_u32 v0, v1, v2 offset:4
	ds_cmpstore_rtn_b32 v0, v1, v2, v3
	ds_cmpstore_b64 v1, v[2:3], v[4:5]
	ds_max_rtn_f32 v0, v1, v2
	ds_swizzle_b32 v0, v1 offset:swizzle(SWAP,16)
	ds_swizzle_b32 v0, v1 offset:swizzle(QUAD_PERM,3,2,1,0)
	ds_swizzle_b32 v0, v1 offset:swizzle(BITMASK_PERM,"p1011")
	ds_swizzle_b32 v0, v1 offset:swizzle(REVERSE,8)
	ds_swizzle_b32 v0, v1 offset:swizzle(BROADCAST,4,1)
	ds_swizzle_b32 v0, v1 offset:swizzle(BITMASK_PERM,"01pip")
	ds_swizzle_b32 v0, v1
	ds_swizzle_b32 v0, v1 offset:0xffff
	ds_bpermute_b32 v0, v1, v2
	ds_permute_b32 v0, v1, v2 offset:4
	ds_append v0
	ds_consume v0 offset:4
	ds_gws_init v0 gds
	ds_add_u32 v1, v2 gds
	ds_nop
	ds_store_b16_d16_hi v1, v2
	ds_load_u16_d16_hi v0, v1
	ds_load_addtid_b32 v0 offset:16
	global_load_b32 v0, v[1:2], off
	global_load_b32 v0, v1, s[2:3] offset:-16
	global_load_b32 v0, v[1:2], off offset:4095 glc slc dlc
	global_load_b128 v[0:3], v1, s[2:3]
	global_load_d16_hi_b16 v0, v[1:2], off
	global_store_b32 v[1:2], v3, off offset:-4096
	global_store_b64 v1, v[2:3], s[4:5]
	global_atomic_add_u32 v[1:2], v3, off
	global_atomic_add_u32 v0, v[1:2], v3, off glc
	global_atomic_cmpswap_b32 v0, v1, v[2:3], s[4:5] glc
	global_atomic_cmpswap_b64 v[1:2], v[3:6], off
	global_atomic_cmpswap_b64 v[0:1], v[1:2], v[3:6], off glc
	global_atomic_add_f32 v1, v2, s[2:3] offset:8
	global_load_addtid_b32 v0, s[2:3]
	global_store_addtid_b32 v0, off
	flat_load_b32 v0, v[1:2]
	flat_load_b32 v0, v[1:2] offset:4095 glc
	flat_store_b64 v[1:2], v[3:4]
	flat_atomic_swap_b32 v0, v[1:2], v3 glc
	flat_atomic_cmpswap_b32 v[1:2], v[3:4]
	scratch_load_b32 v0, off, s0
	scratch_load_b32 v0, v1, off offset:16
	scratch_load_b32 v0, v1, s2 offset:-8
	scratch_load_b32 v0, off, off offset:4
	scratch_store_b32 off, v1, s0 offset:4
	scratch_store_b128 v0, v[1:4], off
	buffer_gl0_inv
	buffer_gl1_inv
	v_cmpx_lt_f32_dpp v1, -v2 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf
	v_cmp_eq_u32_dpp vcc_lo, v1, v2 dpp8:[1,0,3,2,5,4,7,6]
	v_mov_b32_dpp v0, v1 row_shl:1 row_mask:0xf bank_mask:0xf
	v_cvt_f32_i32_dpp v0, v1 row_shl:1 row_mask:0xf bank_mask:0xf
	v_sub_f32_dpp v0, |v1|, -v2 row_shr:2 row_mask:0x5 bank_mask:0xa bound_ctrl:1
	v_add_f32_dpp v0, v1, v2 dpp8:[1,0,3,2,5,4,7,6] fi:1
	s_mov_b32 s0, src_scc
	s_cselect_b32 s0, -1, 0
	s_and_b64 s[0:1], s[2:3], 0x80
	s_or_b64 exec, exec, s[0:1]
	s_xor_b32 exec_lo, exec_lo, vcc_lo
	s_mul_hi_u32 s0, s1, 0xaaaaaaab
	s_bfe_u64 s[0:1], s[2:3], 0x100010
	v_cmp_gt_u32_e64 s0, 0x3e8, v1
	buffer_load_b32 v0, off, s[0:3], 0
	buffer_load_b32 v0, v1, s[4:7], s2 offen offset:16
	buffer_load_b32 v0, v1, s[4:7], 0 idxen
	buffer_load_b64 v[0:1], v[1:2], s[4:7], s8 idxen offen offset:4095 glc slc dlc
	buffer_load_b96 v[0:2], off, s[4:7], 1
	buffer_load_b128 v[0:3], off, s[4:7], -1
	buffer_load_u8 v0, v1, s[4:7], m0 offen
	buffer_load_i16 v0, v1, s[4:7], null offen
	buffer_load_d16_hi_u8 v0, v1, s[4:7], 0 offen
	buffer_load_b32 v[0:1], off, s[4:7], 0 tfe
	buffer_load_b32 v0, off, s[4:7], 0.5
	buffer_load_format_xyzw v[0:3], off, s[4:7], 0
	buffer_load_d16_format_xyz v[0:1], off, s[4:7], 0
	buffer_store_b128 v[0:3], v1, s[4:7], s3 offen offset:8
	buffer_store_d16_hi_b16 v0, v1, s[4:7], 0 offen
	buffer_atomic_add_u32 v0, v1, s[4:7], 0 offen
	buffer_atomic_add_u32 v0, v1, s[4:7], 0 offen glc
	buffer_atomic_cmpswap_b64 v[0:3], v4, s[4:7], 0 offen glc
	buffer_atomic_min_i32 v0, v2, s[4:7], 0 offen glc
	buffer_load_lds_b32 v1, s[4:7], 0 offen
	tbuffer_load_format_x v0, off, s[4:7], 0 format:[BUF_FMT_32_FLOAT]
	tbuffer_load_format_xyzw v[0:3], v4, s[4:7], s1 format:[BUF_FMT_32_32_32_32_UINT] offen offset:16
	tbuffer_store_format_xy v[0:1], v4, s[4:7], 0 format:[BUF_FMT_16_16_UNORM] idxen
	tbuffer_load_format_x v0, off, s[4:7], 0
	tbuffer_load_format_x v0, off, s[4:7], 0 format:0
	tbuffer_load_format_x v0, off, s[4:7], 0 format:100
	tbuffer_load_d16_format_x v0, off, s[4:7], 0 format:[BUF_FMT_16_FLOAT]
	tbuffer_load_format_x v0, off, s[4:7], 0 glc slc dlc
	ds_mskor_b32 v1, v2, v3 offset:8
	ds_mskor_rtn_b32 v0, v1, v2, v3
	ds_mskor_b64 v1, v[2:3], v[4:5]
	ds_mskor_rtn_b64 v[6:7], v1, v[2:3], v[4:5] offset:16
	ds_wrap_rtn_b32 v0, v1, v2, v3 offset:4
	ds_condxchg32_rtn_b64 v[0:1], v1, v[2:3] offset:12
	ds_store_addtid_b32 v2 offset:16
	ds_load_addtid_b32 v0 offset:16
	v_permlane64_b32 v0, v1
