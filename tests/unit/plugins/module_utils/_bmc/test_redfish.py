"""The HTTP client's pure parts: error messages, link following, backoff schedule, input checks.
Retries, timeouts, 401 and TLS against a real server are in tests/integration/redfish."""
import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._bmc import power as _power
from ansible_collections.gpufleet.provision.plugins.module_utils._bmc import redfish as _redfish


def test_redfish_messages_prefers_extended_info():
    body = {"error": {"code": "Base.1.12.GeneralError", "message": "general",
                      "@Message.ExtendedInfo": [{"MessageId": "Base.1.12.PropertyUnknown", "Message": "The property Foo is unknown."}]}}
    assert _redfish.redfish_messages(body) == ["Base.1.12.PropertyUnknown: The property Foo is unknown."]
    assert _redfish.redfish_messages({"error": {"code": "X", "message": "m"}}) == ["X: m"]
    assert _redfish.redfish_messages("not json") == []


def test_link():
    system = {"Bios": {"@odata.id": "/b"}, "Links": {"ManagedBy": [{"@odata.id": "/m"}], "Oem": None}}
    assert _redfish.link(system, "Bios") == "/b"
    assert _redfish.link(system, "Links", "ManagedBy") == "/m"
    assert _redfish.link(system, "Links", "Oem", "Dell", "Jobs") is None
    assert _redfish.link({}, "Bios") is None


def test_backoff_is_exponential_bounded_and_honours_retry_after():
    slept = []
    client = _redfish.RedfishClient("https://b", "u", "pw", backoff=0.5, sleep=slept.append)
    for attempt in range(7):
        client._backoff(attempt, 99, None)
    assert slept == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 16.0]
    slept[:] = []
    client._backoff(0, 99, "3")
    client._backoff(0, 99, "3600")
    client._backoff(0, 99, "Wed, 21 Oct 2015 07:28:00 GMT")
    client._backoff(4, 5, None)  # last attempt: no sleep
    assert slept == [3.0, 16.0, 0.5]


@pytest.mark.parametrize("url,match", [("10.0.0.5", "must look like"), ("https://root:pw@10.0.0.5", "not in baseurl")])
def test_bad_baseurl(url, match):
    with pytest.raises(_redfish.RedfishError, match=match) as err:
        _redfish.RedfishClient(url, "u", "pw")
    assert "pw@" not in str(err.value)


def test_401_message_names_user_not_password():
    client = _redfish.RedfishClient("https://b:8443", "admin", "s3cret")
    err = client._http_error("GET", "/redfish/v1/Systems", 401, "Unauthorized", b"")
    assert "https://b:8443" in str(err) and "'admin'" in str(err) and "s3cret" not in str(err) and err.status == 401


def test_reset_target_from_actions():
    system = {"Actions": {"#ComputerSystem.Reset": {"target": "/s/Actions/ComputerSystem.Reset",
                                                    "ResetType@Redfish.AllowableValues": ["On", "ForceRestart"]}}}
    assert _power.reset_target("b", system) == ("/s/Actions/ComputerSystem.Reset", ["On", "ForceRestart"])
    with pytest.raises(_redfish.RedfishError, match="no #ComputerSystem.Reset"):
        _power.reset_target("b", {"@odata.id": "/s"})


def test_expect_checks_shapes_on_the_way():
    doc = {"Actions": {"#ComputerSystem.Reset": {"target": "/r"}}, "Members": "x", "Links": []}
    assert _redfish.expect("b", "/s", doc, ("Actions", "#ComputerSystem.Reset", "target"), str) == "/r"
    assert _redfish.expect("b", "/s", doc, ("Attributes",), dict, {}) == {}
    with pytest.raises(_redfish.RedfishError, match=r"BMC b: in /s, Members is a string \('x'\); expected a list"):
        _redfish.expect("b", "/s", doc, ("Members",), list)
    with pytest.raises(_redfish.RedfishError, match="in /s, Links is a list; expected an object"):
        _redfish.expect("b", "/s", doc, ("Links", "Sessions"), dict)


def test_members_are_links():
    assert _redfish.member_paths("b", "/c", {"Members": [{"@odata.id": "/c/1"}]}) == ["/c/1"]
    assert _redfish.member_paths("b", "/c", {}) == []
    for bad, said in ([{"Id": 1}], "Members[0] is an object without an @odata.id"), (["/c/1"], "Members[0] is a string"), \
            ([{"@odata.id": ""}], "Members[0]"):
        with pytest.raises(_redfish.RedfishError, match=said.replace("[", r"\[").replace("]", r"\]")):
            _redfish.member_paths("b", "/c", {"Members": bad})


def test_link_is_a_string_or_none():
    assert _redfish.link({"Bios": {"@odata.id": 5}}, "Bios") is None
    assert _redfish.link({"@odata.id": "/s"}) == "/s"


def test_origin_fills_default_ports():
    assert _redfish.origin("https://B:443/x") == _redfish.origin("https://b/y") == ("https", "b", 443)
    assert _redfish.origin("http://b/x") == ("http", "b", 80)
    assert _redfish.origin("https://b:99999/") is None


def test_ranges_name_the_option():
    ranges = {"poll_interval": (0.1, 3600, "seconds")}
    _redfish.check_ranges({"poll_interval": 2.0, "other": -1}, ranges)
    for value in (0, -1, float("nan"), float("inf"), 3601):
        with pytest.raises(_redfish.RedfishError, match="option poll_interval=.* out of range.* between 0.1 and 3600"):
            _redfish.check_ranges({"poll_interval": value}, ranges)


def test_links_elsewhere_get_no_credentials():
    client = _redfish.RedfishClient("https://b:8443", "u", "pw")
    assert client._url("/redfish/v1", True) == "https://b:8443/redfish/v1"
    assert client._url("https://B:8443/redfish/v1", True) == "https://B:8443/redfish/v1"
    assert client._url("http://elsewhere/r.json", False) == "http://elsewhere/r.json"
    with pytest.raises(_redfish.RedfishError, match="refusing to send credentials to http://b:8443/x"):
        client._url("http://b:8443/x", True)


@pytest.mark.parametrize("url", ["ftp://b", "https://", "https://b:0x1f"])
def test_baseurl_must_be_http_with_a_host(url):
    with pytest.raises(_redfish.RedfishError, match="baseurl must look like"):
        _redfish.RedfishClient(url, "u", "pw")


def test_missing_ca_path_is_named(tmp_path):
    with pytest.raises(_redfish.RedfishError, match="BMC https://b: ca_path %s: no such file" % (tmp_path / "x.pem")):
        _redfish.RedfishClient("https://b", "u", "pw", ca_path=str(tmp_path / "x.pem"))


@pytest.mark.parametrize("url", ["https://[::1", "https://b c", "https://b/\u00e9", "https://b?x=1", "https://\x00b",
                                 "ftp://root:calvin-secret@b", "https://root:calvin-secret@b:bad"])
def test_hostile_baseurl_is_refused_without_echoing_credentials(url):
    with pytest.raises(_redfish.RedfishError, match="baseurl") as err:
        _redfish.RedfishClient(url, "u", "pw")
    assert "calvin-secret" not in str(err.value)


def test_a_link_that_is_no_url_path_is_named():
    client = _redfish.RedfishClient("https://b", "u", "pw")
    for link in ("/redfish/v1/Systems/\u00e9", "/redfish/v1/a b", "/redfish\r\nX-Injected: 1"):
        with pytest.raises(_redfish.RedfishError, match="BMC https://b: .* is not a URL path"):
            client._url(link, True)
