"""sipp scenario fragments shared by the SIP tests."""

from pathlib import Path

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

#: After the INVITE: provisional responses and the 200 OK, whose Contact (the bot worker's
#: own address) is the Request-URI of every later request and whose Record-Route (the node's
#: front) is the route set they follow (``[routes]``; sipp sends to the front, its remote
#: address): the ACK, the responses to the bot's requests and our in-dialog requests all
#: pass the front, as RFC 3261 12.2.1.1 has it.
ANSWERED_ALONG_ROUTE = """  <recv response="100" optional="true"/>
  <recv response="180" optional="true"/>
  <recv response="200" rtd="true" rrs="true">
    <action>
      <ereg regexp="&lt;(sip:[^&gt;]*)&gt;" search_in="hdr" header="Contact:" check_it="true"
            assign_to="c,bot_contact"/>
    </action>
  </recv>
  <Reference variables="c"/>
  <send><![CDATA[
ACK [$bot_contact] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: sipp <sip:sipp@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:bot@[remote_ip]:[remote_port]>[peer_tag_param]
Call-ID: [call_id]
CSeq: 1 ACK
Contact: sip:sipp@[local_ip]:[local_port]
Max-Forwards: 70
[routes]
Content-Length: 0

]]></send>
"""


def refer_received(timeout_ms: int) -> str:
    """Wait for the bot's REFER; its Refer-To goes to the ``-trace_logs`` file."""
    return f"""  <recv request="REFER" timeout="{timeout_ms}">
    <action>
      <ereg regexp="Refer-To: *&lt;?([^&gt;[:space:]]*)" search_in="msg" check_it="true"
            assign_to="r,refer_to"/>
      <log message="Refer-To: [$refer_to]"/>
    </action>
  </recv>
  <Reference variables="r"/>
"""


def refer_response(code: int, reason: str) -> str:
    """Answer the REFER (202 to accept it, or a refusal)."""
    return f"""  <send><![CDATA[
SIP/2.0 {code} {reason}
[last_Via:]
[last_From:]
[last_To:]
[last_Call-ID:]
[last_CSeq:]
Contact: <sip:sipp@[local_ip]:[local_port]>
Content-Length: 0

]]></send>
"""


def refer_notify(sipfrag: str, cseq: int = 2) -> str:
    """The final NOTIFY of the REFER's implicit subscription, carrying ``sipfrag``
    (``"SIP/2.0 200 OK"``: the target answered), and the bot's 200 for it."""
    return f"""  <send retrans="500"><![CDATA[
NOTIFY [$bot_contact] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: sipp <sip:sipp@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:bot@[remote_ip]:[remote_port]>[peer_tag_param]
Call-ID: [call_id]
CSeq: {cseq} NOTIFY
Contact: sip:sipp@[local_ip]:[local_port]
Max-Forwards: 70
[routes]
Event: refer
Subscription-State: terminated;reason=noresource
Content-Type: message/sipfrag;version=2.0
Content-Length: [len]

{sipfrag}
]]></send>
  <recv response="200"/>
"""


def caller_refer(refer_to: str, cseq: int, expect: int) -> str:
    """The caller's own REFER inside the call (to the bot's Contact), and the final
    response it must get (``expect``); a 2xx would let the REFER's NOTIFYs follow."""
    return f"""  <send retrans="500"><![CDATA[
REFER [$bot_contact] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: sipp <sip:sipp@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:bot@[remote_ip]:[remote_port]>[peer_tag_param]
Call-ID: [call_id]
CSeq: {cseq} REFER
Contact: sip:sipp@[local_ip]:[local_port]
Max-Forwards: 70
[routes]
Refer-To: <{refer_to}>
Referred-By: <sip:sipp@[local_ip]:[local_port]>
Content-Length: 0

]]></send>
  <recv response="100" optional="true"/>
  <recv response="{expect}"/>
"""


def bye_to_contact(cseq: int = 3) -> str:
    """BYE from sipp to the bot's Contact, and the 200 that must answer it."""
    return f"""  <send retrans="500"><![CDATA[
BYE [$bot_contact] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: sipp <sip:sipp@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:bot@[remote_ip]:[remote_port]>[peer_tag_param]
Call-ID: [call_id]
CSeq: {cseq} BYE
Contact: sip:sipp@[local_ip]:[local_port]
Max-Forwards: 70
[routes]
Content-Length: 0

]]></send>
  <recv response="200" crlf="true"/>
"""


def logged_refer_to(workdir: Path) -> list[str]:
    """The Refer-To values ``refer_received`` logged (sipp run with ``-trace_logs``)."""
    text = "".join(p.read_text(errors="replace") for p in workdir.glob("*_logs.log"))
    return [
        line.split("Refer-To: ", 1)[1].strip() for line in text.splitlines() if "Refer-To: " in line
    ]


#: A one-call INVITE offering PCMU, its media on sipp's ``rtp_stream`` port.
INVITE_STREAMING = """  <send retrans="500"><![CDATA[
INVITE sip:bot@[remote_ip]:[remote_port] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: sipp <sip:sipp@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:bot@[remote_ip]:[remote_port]>
Call-ID: [call_id]
CSeq: 1 INVITE
Contact: sip:sipp@[local_ip]:[local_port]
Max-Forwards: 70
Content-Type: application/sdp
Content-Length: [len]

v=0
o=user1 53655765 2353687637 IN IP[local_ip_type] [local_ip]
s=-
c=IN IP[media_ip_type] [media_ip]
t=0 0
m=audio [rtpstream_audio_port] RTP/AVP 0
a=rtpmap:0 PCMU/8000
a=ptime:20
a=sendrecv
]]></send>
"""

#: Wait for the far end's BYE and answer 200.
ANSWER_BYE = """  <recv request="BYE" timeout="30000"/>
  <send><![CDATA[
SIP/2.0 200 OK
[last_Via:]
[last_From:]
[last_To:]
[last_Call-ID:]
[last_CSeq:]
Content-Length: 0

]]></send>
"""


def stream(ulaw_wav: Path) -> str:
    """Start sending a mu-law WAV file as RTP (PCMU), once, in the background."""
    return f'  <nop><action><exec rtp_stream="{ulaw_wav},1,0"/></action></nop>\n'


def scenario(*steps: str, name: str = "switchboard test") -> str:
    """Wrap steps in a sipp scenario document."""
    return (
        '<?xml version="1.0" encoding="ISO-8859-1" ?>\n'
        f'<scenario name="{name}">\n' + "".join(steps) + "</scenario>\n"
    )
