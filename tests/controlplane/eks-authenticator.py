#!/usr/bin/env python3
"""An EKS authentication double for the remote test cluster: one HTTP server on loopback that
is both

- the API server's token webhook (POST /authenticate, a TokenReview), which accepts a
  `k8s-aws-v1.` token as aws-iam-authenticator does: it sends the presigned GetCallerIdentity
  request the token holds, with its own cluster name in the `x-k8s-aws-id` header, and maps the
  ARN that answers to a user (an assumed role to its role ARN); and
- the STS double it sends that request to (and the controller's AWS_ENDPOINT_URL_STS): a
  presigned GetCallerIdentity whose SigV4 signature it verifies with the secret of the access
  key (the static test key below, or one AssumeRoleWithWebIdentity issued), and
  AssumeRoleWithWebIdentity, which trusts any ServiceAccount JWT whose audience is
  sts.amazonaws.com (it does not check the JWT's signature).

It is also the token endpoint of an Entra ID double (client credentials for the AKS server
app's scope) and of a Google OAuth double (an authorized user's refresh token); the webhook
accepts the access tokens they issued, as `aks:CLIENT` and `gke:CLIENT`.

It also answers EKS DescribeCluster (GET /clusters/NAME) for its own cluster name with the
remote API server's endpoint and CA, and with ResourceNotFoundException for any other name
(it checks the request is signed with a known access key, not the signature itself).

A token signed for another cluster name fails the signature check and is refused.
Each authentication is logged as `authenticated USER` or `refused: WHY` (never the token).

Usage: eks-authenticator.py STATE_DIR PORT CLUSTER_NAME API_SERVER_URL CA_FILE
"""

import base64
import datetime
import hashlib
import hmac
import http.server
import json
import secrets
import sys
import urllib.parse
import urllib.request

ACCOUNT = "123456789012"
STATIC_KEY = "AKIAKCTESTEKS0000000"
STATIC_SECRET = "kc-test-eks-static-secret"
STATIC_ARN = f"arn:aws:iam::{ACCOUNT}:user/kc-controller"

# access key -> (secret, session token or None, caller ARN)
KEYS = {STATIC_KEY: (STATIC_SECRET, None, STATIC_ARN)}

# The other clouds' token endpoints: an Entra ID double (client credentials for the AKS server
# app's scope) and a Google OAuth double (an authorized user's refresh token). The access
# tokens they issue are accepted by the webhook as `aks:CLIENT` and `gke:CLIENT`.
AZURE_CLIENT = ("kc-test-aks-client", "kc-test-aks-secret")
AKS_SCOPE = "6dae42f8-4368-4678-94ff-3960e28e3630/.default"
GOOGLE_CLIENT = ("kc-test-gke-client", "kc-test-gke-secret", "kc-test-gke-refresh")
# access token -> user
ISSUED = {}


def log(message):
    print(message, flush=True)


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


def hmac_sha256(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def aws_quote(text):
    return urllib.parse.quote(text, safe="-_.~")


def verify_presigned(method, path, query, headers):
    """The caller ARN of a valid presigned request, else raises ValueError saying why."""
    params = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
    if params.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
        raise ValueError("not a SigV4 presigned request")
    key_id, date, region, service, terminal = params["X-Amz-Credential"].split("/")
    if service != "sts" or terminal != "aws4_request":
        raise ValueError("credential scope is not sts")
    if key_id not in KEYS:
        raise ValueError("unknown access key")
    secret, session_token, arn = KEYS[key_id]
    if session_token is not None and params.get("X-Amz-Security-Token") != session_token:
        raise ValueError("wrong session token")
    amz_date = params["X-Amz-Date"]
    signed_at = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(
        tzinfo=datetime.timezone.utc
    )
    expires = int(params.get("X-Amz-Expires", "0"))
    if expires > 900:
        raise ValueError("X-Amz-Expires above 900")
    if datetime.datetime.now(datetime.timezone.utc) > signed_at + datetime.timedelta(seconds=expires):
        raise ValueError("expired")
    signed_headers = params["X-Amz-SignedHeaders"]
    canonical_query = "&".join(
        f"{aws_quote(k)}={aws_quote(v)}"
        for k, v in sorted(params.items())
        if k != "X-Amz-Signature"
    )
    canonical_headers = "".join(
        f"{name}:{' '.join(headers.get(name, '').split())}\n" for name in signed_headers.split(";")
    )
    canonical_request = "\n".join(
        [method, path, canonical_query, canonical_headers, signed_headers, sha256_hex(b"")]
    )
    scope = f"{date}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, sha256_hex(canonical_request.encode())]
    )
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac_sha256(key, part)
    expected = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, params.get("X-Amz-Signature", "")):
        raise ValueError("signature does not match")
    return arn


def jwt_claims(token):
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def canonical_arn(arn):
    """aws-iam-authenticator's canonical form: an assumed role is its role."""
    parts = arn.split(":")
    if parts[2] == "sts" and parts[5].startswith("assumed-role/"):
        role = parts[5].split("/")[1]
        return f"arn:aws:iam::{parts[4]}:role/{role}"
    return arn


class Handler(http.server.BaseHTTPRequestHandler):
    cluster = ""
    endpoint = ""
    ca = b""

    def log_message(self, *args):
        pass

    def reply(self, status, body, content_type="text/xml"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        if url.path.startswith("/clusters/"):
            self.describe_cluster(urllib.parse.unquote(url.path[len("/clusters/"):]), headers)
            return
        try:
            arn = verify_presigned("GET", url.path, url.query, headers)
        except (ValueError, KeyError) as e:
            self.reply(
                403,
                f"<ErrorResponse><Error><Code>SignatureDoesNotMatch</Code><Message>{e}</Message></Error></ErrorResponse>",
            )
            return
        self.reply(
            200,
            "<GetCallerIdentityResponse><GetCallerIdentityResult>"
            f"<Arn>{arn}</Arn><UserId>AIDTEST</UserId><Account>{ACCOUNT}</Account>"
            "</GetCallerIdentityResult></GetCallerIdentityResponse>",
        )

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        path = urllib.parse.urlsplit(self.path).path
        if path == "/authenticate":
            self.authenticate(json.loads(body))
            return
        form = dict(urllib.parse.parse_qsl(body.decode()))
        if path.endswith("/oauth2/v2.0/token"):
            ok = (
                form.get("grant_type") == "client_credentials"
                and (form.get("client_id"), form.get("client_secret")) == AZURE_CLIENT
                and form.get("scope") == AKS_SCOPE
            )
            self.issue(ok, f"aks:{AZURE_CLIENT[0]}", "invalid_client")
            return
        if path == "/token":
            ok = (
                form.get("grant_type") == "refresh_token"
                and (form.get("client_id"), form.get("client_secret"), form.get("refresh_token"))
                == GOOGLE_CLIENT
            )
            self.issue(ok, f"gke:{GOOGLE_CLIENT[0]}", "invalid_grant")
            return
        if form.get("Action") != "AssumeRoleWithWebIdentity":
            self.reply(400, "<ErrorResponse><Error><Code>InvalidAction</Code></Error></ErrorResponse>")
            return
        try:
            claims = jwt_claims(form["WebIdentityToken"])
            audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
            if "sts.amazonaws.com" not in audiences:
                raise ValueError("audience is not sts.amazonaws.com")
        except (ValueError, KeyError, IndexError) as e:
            self.reply(
                400,
                f"<ErrorResponse><Error><Code>InvalidIdentityToken</Code><Message>{e}</Message></Error></ErrorResponse>",
            )
            return
        role = form["RoleArn"].split("/")[-1]
        session = form["RoleSessionName"]
        key_id = "ASIA" + secrets.token_hex(8).upper()
        secret = secrets.token_urlsafe(30)
        token = secrets.token_urlsafe(60)
        KEYS[key_id] = (secret, token, f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{session}")
        expiration = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1))
        self.reply(
            200,
            "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>"
            f"<AccessKeyId>{key_id}</AccessKeyId><SecretAccessKey>{secret}</SecretAccessKey>"
            f"<SessionToken>{token}</SessionToken>"
            f"<Expiration>{expiration.strftime('%Y-%m-%dT%H:%M:%SZ')}</Expiration>"
            "</Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>",
        )

    def issue(self, ok, user, error):
        """An OAuth token answer: a new access token for `user`, or `error`."""
        if not ok:
            log(f"refused a token request: {error}")
            self.reply(401, json.dumps({"error": error, "error_description": "the double refuses these credentials"}), "application/json")
            return
        token = secrets.token_urlsafe(32)
        ISSUED[token] = user
        self.reply(
            200,
            json.dumps({"token_type": "Bearer", "access_token": token, "expires_in": 3600}),
            "application/json",
        )

    def describe_cluster(self, name, headers):
        authorization = headers.get("authorization", "")
        if not any(f"Credential={key}/" in authorization for key in KEYS):
            self.reply(403, json.dumps({"message": "The security token included in the request is invalid."}), "application/json")
            return
        if name != self.cluster:
            self.reply(404, json.dumps({"message": f"No cluster found for name: {name}."}), "application/json")
            return
        cluster = {
            "name": name,
            "endpoint": self.endpoint,
            "certificateAuthority": {"data": base64.b64encode(self.ca).decode()},
            "status": "ACTIVE",
        }
        self.reply(200, json.dumps({"cluster": cluster}), "application/json")

    def authenticate(self, review):
        token = review.get("spec", {}).get("token", "")
        status = {"authenticated": False}
        try:
            if token in ISSUED:
                user, uid = ISSUED[token], ISSUED[token]
            else:
                user, uid = self.eks_user(token)
            status = {"authenticated": True, "user": {"username": user, "uid": uid}}
            log(f"authenticated {user}")
        except (ValueError, KeyError, IndexError, UnicodeDecodeError) as e:
            log(f"refused: {e}")
        self.reply(
            200,
            json.dumps(
                {
                    "apiVersion": review.get("apiVersion", "authentication.k8s.io/v1"),
                    "kind": "TokenReview",
                    "status": status,
                }
            ),
            "application/json",
        )

    def eks_user(self, token):
        """The user and uid of an EKS token, as aws-iam-authenticator tells them."""
        if not token.startswith("k8s-aws-v1."):
            raise ValueError("not an EKS token")
        encoded = token[len("k8s-aws-v1."):]
        url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        parts = urllib.parse.urlsplit(url)
        query = dict(urllib.parse.parse_qsl(parts.query))
        if parts.hostname not in ("127.0.0.1", "localhost") or parts.path != "/":
            raise ValueError("not this STS endpoint")
        if query.get("Action") != "GetCallerIdentity":
            raise ValueError("not GetCallerIdentity")
        if "x-k8s-aws-id" not in query.get("X-Amz-SignedHeaders", "").split(";"):
            raise ValueError("x-k8s-aws-id is not signed")
        request = urllib.request.Request(url, headers={"x-k8s-aws-id": self.cluster})
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                text = answer.read().decode()
        except urllib.error.HTTPError as e:
            raise ValueError(f"STS answered {e.code}: {e.read().decode()}")
        arn = text.split("<Arn>")[1].split("</Arn>")[0]
        return canonical_arn(arn), f"aws-iam-authenticator:{ACCOUNT}:{arn}"

def main():
    _state_dir, port, cluster, endpoint, ca_file = sys.argv[1:6]
    port = int(port)
    Handler.cluster = cluster
    Handler.endpoint = endpoint
    with open(ca_file, "rb") as f:
        Handler.ca = f.read()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    log(f"listening on 127.0.0.1:{port} for cluster {cluster}")
    server.serve_forever()


if __name__ == "__main__":
    main()
