"""sipp scenario fragments shared by the SIP tests."""

#: After the INVITE: wait for ringing, CANCEL it, expect 200 for the CANCEL and 487.
CANCEL_AFTER_RINGING = """  <recv response="100" optional="true"/>
  <recv response="180"/>
  <send><![CDATA[
CANCEL sip:bot@[remote_ip]:[remote_port] SIP/2.0
[last_Via:]
From: sipp <sip:sipp@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:bot@[remote_ip]:[remote_port]>
Call-ID: [call_id]
CSeq: 1 CANCEL
Max-Forwards: 70
Content-Length: 0

]]></send>
  <recv response="200"/>
  <recv response="487"/>
"""
