-- Wireshark/tshark post-dissector for the MRC (Multipath Reliable Connection) extension
-- headers. Layouts: docs/wire-format.md; the C++ codec: src/wire/codec.cc.
--
-- Wireshark's own RoCEv2 dissector ("infiniband", UDP port 4791) decodes IPv6/SRH/UDP, BTH,
-- RETH, ImmDt and AETH, and shows what follows as payload; it does not know MRC's vendor
-- opcodes 0xC0-0xC2 ("Unknown OpCode"). This post-dissector runs after it, finds the UDP
-- payload of every packet to port 4791, and decodes what comes after the standard headers:
-- the MRC data extension, SACK extension (bitmap and echoes), trim NACK (with its AETH),
-- probe / probe reply, and the CNP's reserved bytes.
--
-- Use:   wireshark -X lua_script:tools/wireshark/mrc.lua run.pcap
--        tshark -X lua_script:tools/wireshark/mrc.lua -r run.pcap -T fields \
--               -e mrc.opcode -e mrc.data.msg_num -e mrc.sack.cum_psn
-- or copy the file into ~/.local/lib/wireshark/plugins/. Filter with "mrc", "mrc.sack", ...
-- Another UDP port: edit ROCE_PORT below (keep it equal to infiniband.rroce.port).
-- Authenticated sessions (mrc-perf --psk) end every datagram with a 24-byte trailer (counter,
-- AES-GCM tag; docs/wire-format.md section 13): set the preference mrc.auth_trailer
-- (tshark -o mrc.auth_trailer:TRUE) to show it and decode what is before it.

local ROCE_PORT = 4791

local mrc = Proto("mrc", "MRC Multipath Reliable Connection")

local OP_WRITE_ONLY = 0x0A
local OP_WRITE_ONLY_IMM = 0x0B
local OP_ACK = 0x11
local OP_CNP = 0x81
local OP_TRIM_NACK = 0xC0
local OP_PROBE = 0xC1
local OP_PROBE_REPLY = 0xC2

local opcode_names = {
  [OP_WRITE_ONLY] = "RC_RDMA_WRITE_ONLY",
  [OP_WRITE_ONLY_IMM] = "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
  [OP_ACK] = "RC_ACKNOWLEDGE",
  [OP_CNP] = "ROCE_CNP",
  [OP_TRIM_NACK] = "MRC_TRIM_NACK",
  [OP_PROBE] = "MRC_PROBE",
  [OP_PROBE_REPLY] = "MRC_PROBE_REPLY",
}

-- The per-opcode layout, mirroring the table in src/wire/codec.cc. Offsets count from the
-- BTH start; ext = where the MRC extension starts, len = its size.
local BTH = 12
local layout = {
  [OP_WRITE_ONLY] = { ext = 28, len = 24, kind = "data" },
  [OP_WRITE_ONLY_IMM] = { ext = 32, len = 24, kind = "data" },
  [OP_ACK] = { ext = 16, len = 104, kind = "sack" },
  [OP_CNP] = { ext = 12, len = 16, kind = "cnp" },
  [OP_TRIM_NACK] = { ext = 16, len = 12, kind = "nack", aeth = 12 },
  [OP_PROBE] = { ext = 12, len = 24, kind = "probe" },
  [OP_PROBE_REPLY] = { ext = 12, len = 24, kind = "probe" },
}
local ICRC = 4
local AUTH_TRAILER = 24  -- counter (8) + tag (16), behind the ICRC

local f = mrc.fields
f.opcode = ProtoField.uint8("mrc.opcode", "Opcode", base.HEX, opcode_names)
f.payload_len = ProtoField.uint32("mrc.payload_len", "Payload length")

-- Data extension (24 bytes, after RETH [+ ImmDt]).
f.data = ProtoField.bytes("mrc.data", "MRC data extension")
f.data_msg_num = ProtoField.uint32("mrc.data.msg_num", "Message number")
f.data_pkt_index = ProtoField.uint32("mrc.data.pkt_index", "Packet index")
f.data_pkt_count = ProtoField.uint32("mrc.data.pkt_count", "Packet count")
f.data_ev_index = ProtoField.uint16("mrc.data.ev_index", "EV index")
f.data_flags = ProtoField.uint16("mrc.data.flags", "Flags", base.HEX)
f.data_flag_retx = ProtoField.bool("mrc.data.flags.retransmit", "Retransmission", 16, nil, 0x0001)
f.data_flag_last = ProtoField.bool("mrc.data.flags.last", "Last of message", 16, nil, 0x0002)
f.data_flag_imm = ProtoField.bool("mrc.data.flags.has_imm", "Has immediate", 16, nil, 0x0004)
f.data_flag_acknow = ProtoField.bool("mrc.data.flags.ack_now", "ACK now", 16, nil, 0x0008)
f.data_tx_time = ProtoField.uint64("mrc.data.tx_time", "Transmit time (ps)")

-- SACK extension (104 bytes, after AETH).
f.sack = ProtoField.bytes("mrc.sack", "MRC SACK extension")
f.sack_cum_psn = ProtoField.uint32("mrc.sack.cum_psn", "Cumulative PSN")
f.sack_base = ProtoField.uint32("mrc.sack.base", "Bitmap base PSN")
f.sack_bitmap = ProtoField.bytes("mrc.sack.bitmap", "Bitmap (2 x 64 bits)")
f.sack_sacked = ProtoField.uint32("mrc.sack.sacked_psn", "Selectively acknowledged PSN")
f.sack_received_bytes = ProtoField.uint64("mrc.sack.received_bytes", "Received bytes")
f.sack_service_time = ProtoField.uint32("mrc.sack.service_time", "Service time (ns)")
f.sack_echo_count = ProtoField.uint8("mrc.sack.echo_count", "Echo count")
f.sack_ports_down = ProtoField.uint24("mrc.sack.ports_down", "Ports down (bitmap: bit i = port i)", base.HEX)
f.sack_echo = ProtoField.bytes("mrc.sack.echo", "Echo")
f.sack_echo_psn = ProtoField.uint32("mrc.sack.echo.psn", "Echoed PSN")
f.sack_echo_ev = ProtoField.uint16("mrc.sack.echo.ev", "Echoed EV index")
f.sack_echo_flags = ProtoField.uint8("mrc.sack.echo.flags", "Echoed flags", base.HEX)
f.echo_flag_ce = ProtoField.bool("mrc.sack.echo.flags.ecn_ce", "ECN CE", 8, nil, 0x01)
f.echo_flag_trim = ProtoField.bool("mrc.sack.echo.flags.trimmed", "Trimmed", 8, nil, 0x02)
f.echo_flag_retx = ProtoField.bool("mrc.sack.echo.flags.retransmit", "Retransmission", 8, nil,
                                   0x04)
f.echo_flag_dup = ProtoField.bool("mrc.sack.echo.flags.duplicate", "Duplicate", 8, nil, 0x08)

-- Trim NACK (AETH + 12 bytes).
f.nack = ProtoField.bytes("mrc.nack", "MRC trim NACK extension")
f.nack_syndrome = ProtoField.uint8("mrc.nack.syndrome", "AETH syndrome", base.HEX)
f.nack_msn = ProtoField.uint32("mrc.nack.msn", "AETH MSN")
f.nack_psn = ProtoField.uint32("mrc.nack.psn", "Trimmed PSN")
f.nack_cum_psn = ProtoField.uint32("mrc.nack.cum_psn", "Cumulative PSN")
f.nack_ev = ProtoField.uint16("mrc.nack.ev", "EV index")

-- Probe / probe reply (24 bytes).
f.probe = ProtoField.bytes("mrc.probe", "MRC probe extension")
f.probe_reply = ProtoField.bool("mrc.probe.reply", "Reply")
f.probe_id = ProtoField.uint64("mrc.probe.id", "Probe id", base.HEX)
f.probe_tx_time = ProtoField.uint64("mrc.probe.tx_time", "Prober transmit time (ps)")
f.probe_service_time = ProtoField.uint32("mrc.probe.service_time", "Service time (ns)")
f.probe_ev = ProtoField.uint16("mrc.probe.ev", "EV index")
f.probe_port = ProtoField.uint8("mrc.probe.port", "Port (plane)")
f.probe_flags = ProtoField.uint8("mrc.probe.flags", "Flags", base.HEX)

f.cnp_reserved = ProtoField.bytes("mrc.cnp.reserved", "CNP reserved")

f.auth = ProtoField.bytes("mrc.auth", "MRC authentication trailer")
f.auth_counter = ProtoField.uint64("mrc.auth.counter", "Counter (nonce)")
f.auth_tag = ProtoField.bytes("mrc.auth.tag", "AES-128-GCM tag")

mrc.prefs.auth_trailer = Pref.bool("Packets carry a 24-byte authentication trailer", false,
                                   "Authenticated sessions (mrc-perf --psk): a counter and an " ..
                                   "AES-128-GCM tag behind the ICRC of every datagram")

local e_short = ProtoExpert.new("mrc.short", "Packet too short for its MRC headers",
                                expert.group.MALFORMED, expert.severity.ERROR)
mrc.experts = { e_short }

local udp_payload_f = Field.new("udp.payload")
local udp_dstport_f = Field.new("udp.dstport")

local band = (bit32 and bit32.band) or bit.band
local lshift = (bit32 and bit32.lshift) or bit.lshift

local function dissect_data(r, t)
  local s = t:add(f.data, r)
  s:add(f.data_msg_num, r(0, 4))
  s:add(f.data_pkt_index, r(4, 4))
  s:add(f.data_pkt_count, r(8, 4))
  s:add(f.data_ev_index, r(12, 2))
  local fl = s:add(f.data_flags, r(14, 2))
  fl:add(f.data_flag_retx, r(14, 2))
  fl:add(f.data_flag_last, r(14, 2))
  fl:add(f.data_flag_imm, r(14, 2))
  fl:add(f.data_flag_acknow, r(14, 2))
  s:add(f.data_tx_time, r(16, 8))
  return string.format(" msg=%u idx=%u/%u EV=%u", r(0, 4):uint(), r(4, 4):uint(),
                       r(8, 4):uint(), r(12, 2):uint())
end

local function dissect_sack(r, t)
  local s = t:add(f.sack, r)
  s:add(f.sack_cum_psn, r(0, 4))
  local base_psn = r(4, 4):uint()
  s:add(f.sack_base, r(4, 4))
  local bm = s:add(f.sack_bitmap, r(8, 16))
  -- Word w (big-endian uint64) bit i (value 2^i) acknowledges PSN base + 64 w + i.
  for w = 0, 1 do
    for j = 0, 7 do
      local byte = r(8 + 8 * w + j, 1):uint()
      for b = 0, 7 do
        if band(byte, lshift(1, b)) ~= 0 then
          local psn = (base_psn + 64 * w + 8 * (7 - j) + b) % 0x1000000
          bm:add(f.sack_sacked, r(8 + 8 * w + j, 1), psn):set_generated()
        end
      end
    end
  end
  s:add(f.sack_received_bytes, r(24, 8))
  s:add(f.sack_service_time, r(32, 4))
  local count = r(36, 1):uint()
  s:add(f.sack_echo_count, r(36, 1))
  s:add(f.sack_ports_down, r(37, 3))
  for i = 0, math.min(count, 8) - 1 do
    local e = r(40 + 8 * i, 8)
    local es = s:add(f.sack_echo, e)
    es:set_text(string.format("Echo %d: PSN %u, EV %u, flags 0x%02x", i, e(0, 4):uint(),
                              e(4, 2):uint(), band(e(6, 1):uint(), 0x0F)))
    es:add(f.sack_echo_psn, e(0, 4))
    es:add(f.sack_echo_ev, e(4, 2))
    local ef = es:add(f.sack_echo_flags, e(6, 1), band(e(6, 1):uint(), 0x0F))
    ef:add(f.echo_flag_ce, e(6, 1))
    ef:add(f.echo_flag_trim, e(6, 1))
    ef:add(f.echo_flag_retx, e(6, 1))
    ef:add(f.echo_flag_dup, e(6, 1))
  end
  return string.format(" cumPSN=%u base=%u echoes=%u", r(0, 4):uint(), base_psn, count)
end

local function dissect_nack(bth, r, t, layout_row)
  local s = t:add(f.nack, r)
  local a = bth(layout_row.aeth, 4)
  s:add(f.nack_syndrome, a(0, 1))
  s:add(f.nack_msn, a(1, 3))
  s:add(f.nack_psn, r(0, 4))
  s:add(f.nack_cum_psn, r(4, 4))
  s:add(f.nack_ev, r(8, 2))
  return string.format(" trimmed PSN=%u EV=%u", r(0, 4):uint(), r(8, 2):uint())
end

local function dissect_probe(r, t, reply)
  local s = t:add(f.probe, r)
  s:add(f.probe_reply, reply):set_generated()
  s:add(f.probe_id, r(0, 8))
  s:add(f.probe_tx_time, r(8, 8))
  s:add(f.probe_service_time, r(16, 4))
  s:add(f.probe_ev, r(20, 2))
  s:add(f.probe_port, r(22, 1))
  s:add(f.probe_flags, r(23, 1))
  return string.format(" id=0x%s EV=%u port=%u", r(0, 8):uint64():tohex(), r(20, 2):uint(),
                       r(22, 1):uint())
end

function mrc.dissector(tvb, pinfo, tree)
  local payloads = { udp_payload_f() }
  local ports = { udp_dstport_f() }
  if #payloads == 0 or #ports == 0 then return end
  if ports[#ports].value ~= ROCE_PORT then return end
  local bth = payloads[#payloads].range
  local trailer = nil
  if mrc.prefs.auth_trailer then
    if bth:len() < BTH + ICRC + AUTH_TRAILER then return end
    trailer = bth(bth:len() - AUTH_TRAILER, AUTH_TRAILER)
    bth = bth(0, bth:len() - AUTH_TRAILER)
  end
  if bth:len() < BTH + ICRC then return end
  local opcode = bth(0, 1):uint()
  local row = layout[opcode]
  if row == nil then return end  -- not an MRC opcode: leave it to the RoCE dissector

  local t = tree:add(mrc, bth)
  if trailer ~= nil then
    local a = t:add(f.auth, trailer)
    a:add(f.auth_counter, trailer(0, 8))
    a:add(f.auth_tag, trailer(8, 16))
  end
  t:add(f.opcode, bth(0, 1))
  local ext_end = row.ext + row.len
  if bth:len() < ext_end + ICRC then
    t:add_proto_expert_info(e_short)
    return
  end
  local pad = math.floor(band(bth(1, 1):uint(), 0x30) / 16)
  local payload_len = bth:len() - ext_end - ICRC - pad
  if payload_len < 0 then payload_len = 0 end
  t:add(f.payload_len, payload_len):set_generated()

  local r = bth(row.ext, row.len)
  local info
  if row.kind == "data" then
    info = dissect_data(r, t)
  elseif row.kind == "sack" then
    info = dissect_sack(r, t)
  elseif row.kind == "nack" then
    info = dissect_nack(bth, r, t, row)
  elseif row.kind == "probe" then
    info = dissect_probe(r, t, opcode == OP_PROBE_REPLY)
  else
    t:add(f.cnp_reserved, r)
    info = ""
  end

  -- Wireshark 4.0's RoCE dissector labels the vendor opcodes and the CNP "Unknown OpCode":
  -- name them.
  if opcode >= 0xC0 or opcode == OP_CNP then
    pinfo.cols.protocol = "MRC"
    pinfo.cols.info = string.format("%s QP=0x%06x PSN=%u%s", opcode_names[opcode],
                                    bth(5, 3):uint(), bth(9, 3):uint(), info)
  else
    pinfo.cols.info:append(" [MRC" .. info .. "]")
  end
end

register_postdissector(mrc)
