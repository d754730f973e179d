"""``cqlcdc changefeed publish ks.t/feed --bootstrap HOST:PORT --topic NAME [--follow]``.

>>> cqlcdc changefeed publish ks.orders/updates --data-dir DIR --bootstrap 127.0.0.1:9092 \\
...     --topic orders --follow  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

from cqlcdc.cli.data_dir import add_data_dir_arguments


def add_publish_command(feed_subparsers: Any) -> argparse.ArgumentParser:
    """Register ``publish`` on the ``cqlcdc changefeed`` subparsers.

    Returns:
        The ``publish`` parser (its ``func`` default runs the command).
    """
    p: argparse.ArgumentParser = feed_subparsers.add_parser(
        "publish",
        help="publish a feed's records to a Kafka topic, exactly once",
        description="Publish every record not yet published to a Kafka-API broker, one "
        "transaction per slice (the position is committed with the records as the offsets "
        "of a consumer group), partition i to Kafka partition i.",
    )
    p.add_argument("feed", help="keyspace.table/feed")
    add_data_dir_arguments(p)
    p.add_argument("--bootstrap", required=True, metavar="HOST:PORT[,HOST:PORT]")
    p.add_argument("--topic", required=True, help="Kafka topic (created if missing)")
    p.add_argument(
        "--follow", action="store_true", help="keep publishing new records until SIGTERM"
    )
    p.add_argument(
        "--group",
        help="consumer group holding the position (default cqlcdc-publish.TOPIC.FEED-TOPIC-ID)",
    )
    p.add_argument("--transactional-id", help="the producer's (default: the group's name)")
    p.add_argument("--slice", type=int, default=20_000, help="records per transaction")
    p.add_argument(
        "--timeout", type=float, default=30.0, help="seconds each broker operation may take"
    )
    p.add_argument("--retries", type=int, default=5, help="failed slices retried in a row")
    p.add_argument("--replication-factor", type=int, default=-1, help="of a created topic")
    p.add_argument("--progress", type=float, default=2.0, help="seconds between progress lines")
    sec = p.add_argument_group("broker security (librdkafka settings)")
    sec.add_argument(
        "--security-protocol", choices=["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
    )
    sec.add_argument("--sasl-mechanism", help="default PLAIN when --sasl-username is given")
    sec.add_argument("--sasl-username")
    sec.add_argument("--sasl-password", help="default: $CQLCDC_KAFKA_PASSWORD (never printed)")
    sec.add_argument("--ssl-ca", help="CA certificate(s) PEM file to verify the broker")
    sec.add_argument("--ssl-cert", help="client certificate PEM file (mutual TLS)")
    sec.add_argument("--ssl-key", help="client private key PEM file")
    sec.add_argument("--ssl-key-password")
    sec.add_argument(
        "--kafka-config",
        action="append",
        metavar="KEY=VALUE",
        help="any librdkafka setting; repeatable; wins over the options above",
    )
    p.set_defaults(func=cmd_publish)
    return p


def cmd_publish(args: argparse.Namespace) -> int:
    """Run the command: 0 when everything was published (or SIGTERM stopped ``--follow``
    after its open transaction), 1 with one line on stderr otherwise."""
    from cqlcdc.errors import CqlError
    from cqlcdc.publish.kafka_client import PublishError, client_config, parse_config_pairs
    from cqlcdc.publish.publisher import PublishConfig, Publisher

    try:
        password = args.sasl_password
        if password is None and args.sasl_username is not None:
            password = os.environ.get("CQLCDC_KAFKA_PASSWORD")
        client = client_config(
            args.bootstrap,
            security_protocol=args.security_protocol,
            sasl_mechanism=args.sasl_mechanism,
            sasl_username=args.sasl_username,
            sasl_password=password,
            ssl_ca=args.ssl_ca,
            ssl_cert=args.ssl_cert,
            ssl_key=args.ssl_key,
            ssl_key_password=args.ssl_key_password,
            extra=parse_config_pairs(args.kafka_config),
        )
        client.pop("bootstrap.servers")
        publisher = Publisher(
            PublishConfig(
                data_dir=args.data_dir,
                feed=args.feed,
                bootstrap=args.bootstrap,
                topic=args.topic,
                follow=args.follow,
                client=client,
                group=args.group,
                transactional_id=args.transactional_id,
                slice_records=args.slice,
                timeout_s=args.timeout,
                retries=args.retries,
                replication_factor=args.replication_factor,
                progress_s=args.progress,
            )
        )
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: publisher.request_stop())
        publisher.run()
    except PublishError as e:
        print(f"cqlcdc publish: {e.message}", file=sys.stderr)
        return 1
    except CqlError as e:
        print(f"cqlcdc publish: {e.class_name}: {e.message}", file=sys.stderr)
        return 1
    return 0
