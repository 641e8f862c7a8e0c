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
