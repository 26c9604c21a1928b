"""bot_config_nodes: the configuration version each node runs, and the last it refused

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0005'
down_revision: Union[str, Sequence[str], None] = '0004'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table(
        'bot_config_nodes',
        sa.Column('node', sa.String(length=255), nullable=False),
        sa.Column('applied_version', sa.Integer(), nullable=True),
        sa.Column('applied_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('failed_version', sa.Integer(), nullable=True),
        sa.Column('failed_reason', sa.Text(), nullable=True),
        sa.Column('failed_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('node', name=op.f('pk_bot_config_nodes')),
    )


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_table('bot_config_nodes')
