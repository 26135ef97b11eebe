"""Seeds what the console's intel pages show and no command line makes on a loopback
server: a revocation of the signing certificate of the recorded signed-tool.exe, two
package change alerts, and a vendor channel's last runs (one failed). Writes the running
server's SQLite database, as the service's own jobs would.

    python3 seed.py DATA_DIR/knowngood.db THUMBPRINT
"""
import sqlite3
import sys
from datetime import datetime, timedelta, timezone

db, thumbprint = sys.argv[1], sys.argv[2]
now = datetime.now(timezone.utc).replace(microsecond=0)


def ts(t):
    return t.isoformat()


con = sqlite3.connect(db, timeout=30)
with con:
    con.execute(
        "INSERT INTO revoked_certificates (thumbprint, signer, issuer, serial, revoked_at, reason, "
        "check_method, crl_url, recorded_at) VALUES (?, ?, ?, ?, ?, ?, 'crl', ?, ?)",
        (thumbprint, "CN=Example Signing <Test>", "CN=Example Code Signing CA", "8a1122",
         ts(now - timedelta(days=2)), "keyCompromise", "http://crl.example/cs.crl", ts(now)),
    )
    for i, (name, previous, latest) in enumerate([
        ("left-pad", "1" * 64, "a" * 64),
        ("lodash", "2" * 64, "b" * 64),
    ]):
        con.execute(
            "INSERT INTO change_alerts (id, ecosystem, package_name, version, previous_sha256, "
            "latest_sha256, observed_at) VALUES (?, 'npm', ?, '1.0.0', ?, ?, ?)",
            (f"browser-alert-{i}", name, previous, latest, ts(now - timedelta(minutes=i))),
        )
    con.execute(
        "INSERT INTO vendor_health (vendor, last_success_at) VALUES ('example', ?) "
        "ON CONFLICT (vendor) DO UPDATE SET last_success_at = excluded.last_success_at",
        (ts(now),),
    )
    con.execute(
        "INSERT INTO vendor_health (vendor, last_error_at, last_error) VALUES (?, ?, ?)",
        ("Debian bookworm", ts(now), "download: https://deb.example/pool/x.deb?token=s3cr3t answered 503"),
    )
con.close()
