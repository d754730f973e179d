"""What a Spark master is told about executors (``pipeline.spark.cluster_conf``): nothing
for local mode, an explicit size and the Python and object store to use on a cluster."""

from __future__ import annotations

from cqlcdc.pipeline.spark import cluster_conf, is_cluster

ENV = {
    "SPARK_LOCAL_IP": "127.0.0.1",
    "PYSPARK_PYTHON": "/opt/venv/bin/python",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
    "AWS_REGION": "us-east-1",
    "AWS_SECRET_ACCESS_KEY": "secret",
}


def test_local_mode_sets_only_where_the_driver_listens() -> None:
    assert not is_cluster("local[2]") and not is_cluster("local")
    assert cluster_conf("local[*]", ENV) == {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }


def test_a_cluster_gets_an_explicit_executor_size_and_environment() -> None:
    for master in ("spark://127.0.0.1:7077", "local-cluster[2,1,1024]", "k8s://https://k:443"):
        assert is_cluster(master)
    conf = cluster_conf("spark://127.0.0.1:7077", ENV)
    assert conf["spark.executor.memory"] == "1g"
    assert conf["spark.executor.cores"] == "1"
    assert conf["spark.executorEnv.PYSPARK_PYTHON"] == "/opt/venv/bin/python"
    assert conf["spark.executorEnv.SPARK_LOCAL_IP"] == "127.0.0.1"
    assert conf["spark.executorEnv.AWS_ENDPOINT_URL"] == "http://127.0.0.1:9000"
    assert conf["spark.executorEnv.AWS_REGION"] == "us-east-1"
    # credentials are the workers' own (an instance role, their environment), never conf
    assert not any("SECRET" in key for key in conf)


def test_the_environment_sizes_executors_and_a_routable_address_stays_the_workers() -> None:
    env = {**ENV, "SPARK_LOCAL_IP": "10.0.0.5", "SPARK_EXECUTOR_MEMORY": "4g"}
    env["SPARK_EXECUTOR_CORES"] = "2"
    conf = cluster_conf("spark://10.0.0.1:7077", env)
    assert conf["spark.driver.host"] == "10.0.0.5"
    assert (conf["spark.executor.memory"], conf["spark.executor.cores"]) == ("4g", "2")
    assert "spark.executorEnv.SPARK_LOCAL_IP" not in conf  # each worker binds its own
